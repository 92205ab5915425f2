//! [`Line`]: the waiters of one side of a channel without a lock (see
//! `flavors/lockfree/`), behind a lock of their own and a flag that says whether
//! anyone waits, so that a send or receive that finds nobody waiting on
//! the other side reads one word and takes no lock.
//!
//! The flag and the channel's positions are read and written in one total
//! order (`SeqCst`): a waiter raises the flag (registering) and then looks
//! at the positions once more before it parks; a notifier moves a position
//! and then reads the flag. Either the waiter sees the move and does not
//! park, or the notifier sees the flag and wakes it.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::channel::context::{Context, Entry, Kind, Waiters};
use crate::channel::spin_lock::{SpinGuard, SpinLock};
use crate::scheduler::wakeups::Wakeups;

pub(crate) struct Line {
    waiters: SpinLock<Waiters>,
    /// No one waits (the list is empty): a notifier need not lock.
    empty: AtomicBool,
}

impl Line {
    pub(crate) fn new() -> Line {
        Line {
            waiters: SpinLock::new(Waiters::default()),
            empty: AtomicBool::new(true),
        }
    }

    fn lock(&self) -> SpinGuard<'_, Waiters> {
        self.waiters.lock()
    }

    /// After a removal: says whether anyone still waits. Only a
    /// registration must store in the one total order (`register`): a
    /// notifier that reads a stale `false` merely takes the lock.
    fn settle(&self, waiters: &Waiters) {
        self.empty.store(waiters.is_empty(), Ordering::Release);
    }

    /// Registers operation `oper` of the wait `cx` (a `Notify` or a
    /// `Watch`). The caller then looks at the channel once more before it
    /// parks (see the module docs).
    pub(crate) fn register(&self, cx: &Context, oper: usize, kind: Kind) {
        let mut waiters = self.lock();
        waiters.register(cx, oper, kind);
        self.empty.store(false, Ordering::SeqCst);
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
