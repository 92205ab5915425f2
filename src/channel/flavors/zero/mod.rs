//! The zero flavor, [`Zero`]: the channel behind `bounded(0)` (a
//! rendezvous) and behind a bounded channel too large for a ring: a FIFO
//! of messages under one lock, with the lines of waiting receivers and
//! senders beside it (see `context.rs` for how a wait is registered,
//! chosen and settled).
//!
//! # Invariants
//!
//! - A receiver waits only while there is nothing to take: a sender that
//!   finds one waiting hands its message straight into the receiver's
//!   packet, in arrival order.
//! - A sender waits only while there is no room (`len + reserved` reached
//!   the capacity; a capacity of 0 never has room). A receiver that makes
//!   room lets the first waiting sender in: its message moves to the back
//!   of the queue, or, for a `select`'s send whose message is not made yet,
//!   room is reserved for it (`reserved`), which its `send` then uses.
//! - On a channel of capacity 0 a `select`'s send and a receiver are paired
//!   when either chooses the other, before the message is made: the
//!   receiver waits for that message (see `promise.rs`); nothing is ever
//!   reserved there.
//! - A message is never lost: a receiver that is cancelled after a message
//!   was handed to it gives it to the next waiting receiver or puts it back
//!   at the front of the queue, even on a channel of capacity 0 (the
//!   capacity bounds what senders add, not what comes back).
//! - User code (a message's `drop`) never runs under the lock.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use crate::channel::context::{Context, Kind};
use crate::channel::err::{TryRecvError, TrySendError};
use crate::channel::ready_cell::ReadyCell;
use crate::channel::spin_lock::{SpinGuard, SpinLock};
use crate::channel::waker::Waker;
use crate::scheduler::wakeups::Wakeups;

#[cfg(all(test, loom))]
mod models;
mod promise;
mod select_ops;
mod waits;

pub(crate) use promise::{Got, Promise};
pub(crate) use select_ops::{Registration, SendGo};

pub(crate) struct Zero<T> {
    /// Held for a few steps, never across a park or user code.
    inner: SpinLock<Inner<T>>,
    /// `usize::MAX`: unbounded.
    cap: usize,
    pub(crate) senders: AtomicUsize,
    pub(crate) receivers: AtomicUsize,
    /// The readiness fd, once a receiver asked for one (`ready_cell.rs`).
    pub(crate) ready: ReadyCell,
}

struct Inner<T> {
    queue: VecDeque<T>,
    /// Room promised to `select` sends that were let in (see the module
    /// docs), counted against the capacity.
    reserved: usize,
    receivers: Waker,
    senders: Waker,
    /// Every sender or every receiver is gone.
    disconnected: bool,
    /// A receive has been told `Disconnected`: the end is final, so a
    /// message given back after it (by a receiver that got it and unwound
    /// before taking it) goes down with that receiver, as a message it had
    /// taken would, instead of coming out of an ended channel.
    over: bool,
}

/// Capacity (in messages) an empty queue keeps; more is freed.
const SHRINK_ABOVE: usize = 1024;

/// A waiting sender's slot: the message it holds out.
pub(crate) type Slot<T> = UnsafeCell<Option<T>>;
/// A waiting receiver's slot: what it is handed.
pub(crate) type RecvSlot<T> = UnsafeCell<Option<Got<T>>>;
/// A `select`'s waiting send's slot (capacity 0): the promise it is paired
/// by.
pub(crate) type PromiseSlot<T> = UnsafeCell<Option<Arc<Promise<T>>>>;

/// Writes `value` into the slot of type `S` behind an entry's pointer.
///
/// # Safety
///
/// `slot` is the `*mut S` of an entry of a `Zero<T>` that the caller
/// claimed (`Context::claim`) under that channel's lock and has not
/// finished: a receiver's `RecvSlot<T>`, a sender's `Slot<T>`, or a lazy
/// send's `PromiseSlot<T>`.
unsafe fn put<S>(slot: *mut (), value: S) {
    // SAFETY: the caller's contract: the waiter does not look at its slot
    // until `finish`, and keeps it alive until then (context.rs).
    unsafe { *slot.cast::<Option<S>>() = Some(value) };
}

/// Takes the value out of the slot of type `S` behind an entry's pointer.
///
/// # Safety
///
/// As for [`put`].
unsafe fn take<S>(slot: *mut ()) -> Option<S> {
    // SAFETY: as for `put`.
    unsafe { (*slot.cast::<Option<S>>()).take() }
}

impl<T> Zero<T> {
    /// Whether a send never waits here (`sync::mpsc::channel`'s).
    #[inline]
    pub(crate) fn is_unbounded(&self) -> bool {
        self.cap == usize::MAX
    }

    pub(crate) fn new(cap: Option<usize>) -> Zero<T> {
        Zero {
            inner: SpinLock::new(Inner {
                queue: VecDeque::new(),
                reserved: 0,
                receivers: Waker::default(),
                senders: Waker::default(),
                disconnected: false,
                over: false,
            }),
            cap: cap.unwrap_or(usize::MAX),
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
            ready: ReadyCell::new(),
        }
    }

    fn lock(&self) -> SpinGuard<'_, Inner<T>> {
        self.inner.lock()
    }

    pub(crate) fn capacity(&self) -> Option<usize> {
        (self.cap != usize::MAX).then_some(self.cap)
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub(crate) fn is_full(&self) -> bool {
        let inner = self.lock();
        inner.queue.len() + inner.reserved >= self.cap
    }

    // ---- under the lock --------------------------------------------------

    /// Sends `message` without waiting: into a waiting receiver's hand, or
    /// the queue when there is room (or `reserved` for it, which it uses).
    fn send_locked(
        &self,
        inner: &mut Inner<T>,
        message: T,
        reserved: bool,
        me: *const Context,
        wake: &mut Wakeups,
    ) -> Result<(), TrySendError<T>> {
        if reserved {
            inner.reserved -= 1;
        }
        if inner.disconnected {
            return Err(TrySendError::Disconnected(message));
        }
        let taker = inner.receivers.take_first(me, |e| {
            matches!(e.kind(), Kind::Packet(_)) && e.cx().claim()
        });
        if let Some(entry) = taker {
            let Kind::Packet(packet) = entry.kind() else {
                unreachable!("only packets are taken")
            };
            // SAFETY: claimed just now under our lock, a receiver's slot of
            // this channel's `T`.
            unsafe { put(packet, Got::Message(message)) };
            wake.push(entry.finish());
            return Ok(());
        }
        if reserved || inner.queue.len() + inner.reserved < self.cap {
            inner.queue.push_back(message);
            inner.receivers.wake_watchers(wake);
            return Ok(());
        }
        Err(TrySendError::Full(message))
    }

    /// Receives without waiting: from the queue (letting a waiting sender
    /// in behind), from a waiting sender's hand, or, on a channel of
    /// capacity 0, the promise of a waiting `select`'s send, paired with
    /// us now (see `promise.rs`).
    fn recv_locked(
        &self,
        inner: &mut Inner<T>,
        me: *const Context,
        wake: &mut Wakeups,
    ) -> Result<Got<T>, TryRecvError> {
        if let Some(message) = inner.queue.pop_front() {
            if inner.queue.is_empty() && inner.queue.capacity() > SHRINK_ABOVE {
                // A burst is over: give its memory back, as crossbeam's
                // list frees its blocks (a queue never shrinks by itself).
                inner.queue.shrink_to(SHRINK_ABOVE / 4);
            }
            self.admit_sender(inner, me, wake);
            if inner.queue.len() + inner.reserved < self.cap {
                inner.senders.wake_watchers(wake);
            }
            return Ok(Got::Message(message));
        }
        // With the queue empty, a buffered channel's waiting senders wait
        // for room that reservations hold: only a rendezvous pairs here.
        let rendezvous = self.cap == 0;
        let giver = inner.senders.take_first(me, |e| match e.kind() {
            Kind::Packet(_) => e.cx().claim(),
            Kind::Lazy(_) => rendezvous && e.cx().claim(),
            Kind::Watch | Kind::Notify => false,
        });
        match giver {
            Some(entry) => {
                let got = match entry.kind() {
                    Kind::Packet(packet) => {
                        // SAFETY: claimed just now under our lock, a
                        // sender's slot of this channel's `T`, which holds
                        // its message.
                        let message = unsafe { take::<T>(packet) };
                        Got::Message(message.expect("a waiting sender's message"))
                    }
                    Kind::Lazy(slot) => {
                        let promise = Promise::new();
                        // SAFETY: claimed just now under our lock, a lazy
                        // send's `PromiseSlot<T>` (capacity 0).
                        unsafe { put(slot, promise.clone()) };
                        Got::Promised(promise)
                    }
                    Kind::Watch | Kind::Notify => unreachable!("only packets are taken"),
                };
                wake.push(entry.finish());
                Ok(got)
            }
            None if inner.disconnected => {
                inner.over = true;
                Err(TryRecvError::Disconnected)
            }
            None => Err(TryRecvError::Empty),
        }
    }

    /// After a receive made room: the first waiting sender comes in.
    fn admit_sender(&self, inner: &mut Inner<T>, me: *const Context, wake: &mut Wakeups) {
        if inner.queue.len() + inner.reserved >= self.cap {
            return;
        }
        let admitted = inner.senders.take_first(me, |e| match e.kind() {
            Kind::Packet(_) => e.cx().claim(),
            Kind::Lazy(_) => e.cx().claim(),
            Kind::Watch | Kind::Notify => false,
        });
        if let Some(entry) = admitted {
            let unparker = match entry.kind() {
                Kind::Packet(packet) => {
                    // SAFETY: as in `recv_locked`.
                    let message = unsafe { take::<T>(packet) }.expect("a waiting sender's message");
                    inner.queue.push_back(message);
                    entry.finish()
                }
                _ => {
                    inner.reserved += 1;
                    entry.finish()
                }
            };
            wake.push(unparker);
        }
    }

    /// A message handed to a receiver that cannot keep it (it unwound):
    /// to the next waiting receiver, or back to the front of the queue.
    fn give_back_locked(&self, inner: &mut Inner<T>, message: T, wake: &mut Wakeups) {
        let taker = inner.receivers.take_first(std::ptr::null(), |e| {
            matches!(e.kind(), Kind::Packet(_)) && e.cx().claim()
        });
        match taker {
            Some(entry) => {
                let Kind::Packet(packet) = entry.kind() else {
                    unreachable!("only packets are taken")
                };
                // SAFETY: as in `send_locked`.
                unsafe { put(packet, Got::Message(message)) };
                wake.push(entry.finish());
            }
            None => {
                inner.queue.push_front(message);
                inner.receivers.wake_watchers(wake);
            }
        }
    }

    // ---- the operations ---------------------------------------------------

    pub(crate) fn try_send(&self, message: T) -> Result<(), TrySendError<T>> {
        let mut wake = Wakeups::default();
        let result = self.send_locked(
            &mut self.lock(),
            message,
            false,
            std::ptr::null(),
            &mut wake,
        );
        wake.wake();
        result
    }

    pub(crate) fn try_recv(&self) -> Result<T, TryRecvError> {
        loop {
            let mut wake = Wakeups::default();
            let result = self.recv_locked(&mut self.lock(), std::ptr::null(), &mut wake);
            wake.wake();
            // A promise broken: look again.
            if let Some(message) = result?.settle(self) {
                return Ok(message);
            }
        }
    }

    /// Every sender (`receivers_gone` false) or every receiver is gone:
    /// wakes every waiter; with no receivers left, the messages are dropped
    /// (after the lock is released).
    pub(crate) fn disconnect(&self, receivers_gone: bool) {
        let mut wake = Wakeups::default();
        let mut inner = self.lock();
        inner.disconnected = true;
        inner.receivers.disconnect(&mut wake);
        inner.senders.disconnect(&mut wake);
        let dropped = if receivers_gone {
            std::mem::take(&mut inner.queue)
        } else {
            VecDeque::new()
        };
        drop(inner);
        wake.wake();
        drop_one_by_one(dropped);
    }
}

/// Drops the messages in order; one whose `drop` panics ends it there, and
/// the rest leak (dropping them while unwinding would abort the process on
/// a second panic), as crossbeam does.
pub(crate) fn drop_one_by_one<T>(queue: VecDeque<T>) {
    let mut queue = std::mem::ManuallyDrop::new(queue);
    while let Some(message) = queue.pop_front() {
        drop(message);
    }
    // Empty now: only its buffer is freed.
    drop(std::mem::ManuallyDrop::into_inner(queue));
}
