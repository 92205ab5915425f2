//! The wakers of a channel, as crossbeam-channel's `waker.rs`: a [`Waker`]
//! is the line of waiting operations of one side of a channel (receivers
//! or senders), in arrival order, kept under its channel's lock; a
//! [`SyncWaker`] is a waker with a lock of its own and a flag that says
//! whether anyone waits, for the flavors without a lock.
//!
//! A [`SyncWaker`] lets a send or receive that finds nobody waiting on the
//! other side read one word and take no lock. The flag and the channel's
//! positions are read and written in one total order (`SeqCst`): a waiter
//! raises the flag (registering) and then looks at the positions once more
//! before it parks; a notifier moves a position and then reads the flag.
//! Either the waiter sees the move and does not park, or the notifier sees
//! the flag and wakes it.

use std::collections::VecDeque;

use crate::atomic::{AtomicBool, Ordering, dekker_point};

use crate::channel::context::{Context, Entry, Kind};
use crate::channel::selection::Selected;
use crate::channel::spin_lock::{SpinGuard, SpinLock};
use crate::scheduler::wakeups::Wakeups;

pub(crate) struct SyncWaker {
    waiters: SpinLock<Waker>,
    /// No one waits (the list is empty): a notifier need not lock.
    empty: AtomicBool,
}

impl SyncWaker {
    pub(crate) fn new() -> SyncWaker {
        SyncWaker {
            waiters: SpinLock::new(Waker::default()),
            empty: AtomicBool::new(true),
        }
    }

    fn lock(&self) -> SpinGuard<'_, Waker> {
        self.waiters.lock()
    }

    /// After a removal: says whether anyone still waits. Only a
    /// registration must store in the one total order (`register`): a
    /// notifier that reads a stale `false` merely takes the lock.
    fn settle(&self, waiters: &Waker) {
        self.empty.store(waiters.is_empty(), Ordering::Release);
    }

    /// Registers operation `oper` of the wait `cx` (a `Notify` or a
    /// `Watch`). The caller then looks at the channel once more before it
    /// parks (see the module docs).
    pub(crate) fn register(&self, cx: &Context, oper: usize, kind: Kind) {
        let mut waiters = self.lock();
        waiters.register(cx, oper, kind);
        self.empty.store(false, Ordering::SeqCst);
        // The caller looks at the positions next (the waiter's side).
        dekker_point();
    }

    /// Removes the entry of `oper` of `cx`, if still there.
    pub(crate) fn unregister(&self, cx: &Context, oper: usize) {
        let mut waiters = self.lock();
        waiters.unregister(cx, oper);
        self.settle(&waiters);
    }

    /// Tells the line that its side may go ahead: wakes the first waiting
    /// operation (it tries again) and every watcher. Call after the move
    /// that made the side ready.
    #[inline]
    pub(crate) fn notify(&self) {
        // After the move (the notifier's side).
        dekker_point();
        if !self.empty.load(Ordering::SeqCst) {
            self.notify_waiting();
        }
    }

    #[cold]
    #[inline(never)]
    fn notify_waiting(&self) {
        let mut wake = Wakeups::default();
        let mut waiters = self.lock();
        // A packet's waiter woken this way finds its packet untouched and
        // tries again, as a `Notify` does.
        let first = waiters.take_first(std::ptr::null(), |e| {
            matches!(e.kind(), Kind::Notify | Kind::Packet(_)) && e.cx().claim()
        });
        let first = first.map(Entry::finish);
        waiters.wake_watchers(&mut wake);
        self.settle(&waiters);
        drop(waiters);
        if let Some(unparker) = first {
            unparker.unpark();
        }
        wake.wake();
    }

    /// Whether anyone may wait (a hint: read without the lock).
    #[inline]
    pub(crate) fn maybe_waiting(&self) -> bool {
        dekker_point();
        !self.empty.load(Ordering::SeqCst)
    }

    /// The first waiting operation with a packet (a blocking send or
    /// receive, not a `select`'s), claimed for a hand-over, if `now` says
    /// yes under the line's lock. The caller writes or takes the packet,
    /// then `finish`es the entry and wakes its waiter.
    pub(crate) fn claim_packet(&self, now: impl FnOnce() -> bool) -> Option<Entry> {
        let mut waiters = self.lock();
        if !now() {
            return None;
        }
        let entry = waiters.take_first(std::ptr::null(), |e| {
            matches!(e.kind(), Kind::Packet(_)) && e.cx().claim()
        })?;
        self.settle(&waiters);
        Some(entry)
    }

    /// The first waiting operation, taken out of the line and claimed, for
    /// the caller to `finish` and wake: a packet's after a hand-over, a
    /// `Notify` at once (it tries again). Every watcher is woken.
    pub(crate) fn take_first(&self) -> Option<Entry> {
        let mut wake = Wakeups::default();
        let mut waiters = self.lock();
        let first = waiters.take_first(std::ptr::null(), |e| match e.kind() {
            Kind::Packet(_) | Kind::Notify => e.cx().claim(),
            _ => false,
        });
        waiters.wake_watchers(&mut wake);
        self.settle(&waiters);
        drop(waiters);
        wake.wake();
        first
    }

    /// Selects every wait as disconnected, and empties the line.
    pub(crate) fn disconnect(&self) {
        let mut wake = Wakeups::default();
        let mut waiters = self.lock();
        waiters.disconnect(&mut wake);
        self.empty.store(true, Ordering::Release);
        drop(waiters);
        wake.wake();
    }
}

/// A channel's line of waiting receivers or senders, in arrival order.
///
/// Watchers (`Kind::Watch`, a `Select::ready`) stay in the line until the
/// channel wakes them with [`Waker::wake_watchers`] when their side
/// becomes ready — a message put in the queue, room made, a partner
/// waiting — never because an operation merely looked at the line.
#[derive(Default)]
pub(crate) struct Waker {
    entries: VecDeque<Entry>,
    /// How many of `entries` are watchers: a line without any is not
    /// walked to wake them.
    watchers: usize,
}

// SAFETY: the raw context pointers are only dereferenced under the lock of
// the channel that owns this list, while their waiters keep them alive
// (module docs); a context is `Sync` (an atomic word and an unparker).
unsafe impl Send for Waker {}

impl Waker {
    /// Registers operation `oper` of the wait `cx` (which must stay alive
    /// and unregister before it goes: see [`OnUnwind`]).
    #[inline]
    pub(crate) fn register(&mut self, cx: &Context, oper: usize, kind: Kind) {
        if kind == Kind::Watch {
            self.watchers += 1;
        }
        self.entries.push_back(Entry { cx, oper, kind });
    }

    /// Removes the entry of `oper` of `cx`, if still there.
    pub(crate) fn unregister(&mut self, cx: &Context, oper: usize) -> Option<Entry> {
        let i = self
            .entries
            .iter()
            .position(|e| std::ptr::eq(e.cx, cx) && e.oper == oper)?;
        self.remove(i)
    }

    /// Whether no operation waits in the line.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn remove(&mut self, i: usize) -> Option<Entry> {
        // At either end without `VecDeque::remove`'s general shift (a
        // select's entries are often the last or first of a short line).
        let entry = if i == 0 {
            self.entries.pop_front()
        } else if i + 1 == self.entries.len() {
            self.entries.pop_back()
        } else {
            self.entries.remove(i)
        }?;
        if entry.kind == Kind::Watch {
            self.watchers -= 1;
        }
        Some(entry)
    }

    /// The first entry of another wait than `me` that `accept` takes,
    /// removed; entries whose wait has ended on its own are dropped on the
    /// way; watchers are passed over. `accept` sees each candidate with its
    /// context still waiting and must select it (`claim` or `try_select`)
    /// to take it; returning `false` leaves it in place.
    pub(crate) fn take_first(
        &mut self,
        me: *const Context,
        mut accept: impl FnMut(&Entry) -> bool,
    ) -> Option<Entry> {
        // The common case first: the head of the line is taken.
        if let Some(entry) = self.entries.front()
            && !std::ptr::eq(entry.cx, me)
            && entry.kind != Kind::Watch
            && entry.cx().is_waiting()
            && accept(entry)
        {
            return self.entries.pop_front();
        }
        let mut i = 0;
        while i < self.entries.len() {
            let entry = &self.entries[i];
            if std::ptr::eq(entry.cx, me) || entry.kind == Kind::Watch {
                i += 1;
                continue;
            }
            if !entry.cx().is_waiting() {
                // Its wait ended elsewhere; its waiter unregisters (and
                // finds nothing) or already did.
                self.remove(i);
                continue;
            }
            if accept(entry) {
                return self.remove(i);
            }
            i += 1;
        }
        None
    }

    /// Whether another wait than `me` waits here with an operation of a
    /// kind that `is` accepts.
    pub(crate) fn any(&self, me: *const Context, is: impl Fn(Kind) -> bool) -> bool {
        self.entries
            .iter()
            .any(|e| !std::ptr::eq(e.cx, me) && is(e.kind) && e.cx().is_waiting())
    }

    /// Wakes every watcher (the operations they watch may go ahead now).
    #[inline]
    pub(crate) fn wake_watchers(&mut self, wake: &mut Wakeups) {
        if self.watchers != 0 {
            self.wake_watchers_slow(wake);
        }
    }

    #[inline(never)]
    fn wake_watchers_slow(&mut self, wake: &mut Wakeups) {
        self.watchers = 0;
        self.entries.retain(|e| {
            if e.kind != Kind::Watch {
                return true;
            }
            if let Some(unparker) = e.select(Selected::Operation(e.oper)) {
                wake.push(unparker);
            }
            false
        });
    }

    /// Selects every wait as disconnected, and empties the line.
    pub(crate) fn disconnect(&mut self, wake: &mut Wakeups) {
        self.watchers = 0;
        for e in self.entries.drain(..) {
            if let Some(unparker) = e.select(Selected::Disconnected) {
                wake.push(unparker);
            }
        }
    }
}
