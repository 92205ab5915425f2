//! The channel behind `bounded` and `unbounded`: a FIFO of messages under
//! one lock, with the lines of waiting receivers and senders beside it
//! (see `context.rs` for how a wait is registered, chosen and settled).
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
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::channel::context::{Context, Kind, OnUnwind, Selected, Waiters, wait};
use crate::channel::err::{RecvTimeoutError, SendTimeoutError, TryRecvError, TrySendError};
use crate::sync::waiters::Wakeups;
use crate::timer::clock;

mod promise;
mod select_ops;

pub(crate) use promise::{Got, Promise};
pub(crate) use select_ops::SendGo;

pub(crate) struct Chan<T> {
    inner: Mutex<Inner<T>>,
    /// `usize::MAX`: unbounded.
    cap: usize,
    pub(crate) senders: AtomicUsize,
    pub(crate) receivers: AtomicUsize,
}

struct Inner<T> {
    queue: VecDeque<T>,
    /// Room promised to `select` sends that were let in (see the module
    /// docs), counted against the capacity.
    reserved: usize,
    receivers: Waiters,
    senders: Waiters,
    /// Every sender or every receiver is gone.
    disconnected: bool,
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
/// `slot` is the `*mut S` of an entry of a `Chan<T>` that the caller
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

impl<T> Chan<T> {
    pub(crate) fn new(cap: Option<usize>) -> Chan<T> {
        Chan {
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                reserved: 0,
                receivers: Waiters::default(),
                senders: Waiters::default(),
                disconnected: false,
            }),
            cap: cap.unwrap_or(usize::MAX),
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        // No user code runs under the lock, so it is never poisoned by
        // one; a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
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
            entry.cx().finish(Selected::Operation(entry.oper()));
            wake.push(entry.into_unparker());
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
            Kind::Watch => false,
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
                    Kind::Watch => unreachable!("watchers are not taken"),
                };
                entry.cx().finish(Selected::Operation(entry.oper()));
                wake.push(entry.into_unparker());
                Ok(got)
            }
            None if inner.disconnected => Err(TryRecvError::Disconnected),
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
            Kind::Lazy(_) => e.cx().try_select(Selected::Operation(e.oper())),
            Kind::Watch => false,
        });
        if let Some(entry) = admitted {
            match entry.kind() {
                Kind::Packet(packet) => {
                    // SAFETY: as in `recv_locked`.
                    let message = unsafe { take::<T>(packet) }.expect("a waiting sender's message");
                    inner.queue.push_back(message);
                    entry.cx().finish(Selected::Operation(entry.oper()));
                }
                _ => inner.reserved += 1,
            }
            wake.push(entry.into_unparker());
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
                entry.cx().finish(Selected::Operation(entry.oper()));
                wake.push(entry.into_unparker());
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

    /// Sends, waiting for room (or a receiver) until `deadline`.
    ///
    /// The first try is made here and the wait in a frame of its own: a
    /// send that goes straight through holds few copies of the message on
    /// the stack (a fiber's is small, a message may be large).
    pub(crate) fn send(
        &self,
        message: T,
        deadline: Option<u64>,
    ) -> Result<(), SendTimeoutError<T>> {
        let mut wake = Wakeups::default();
        let mut inner = self.lock();
        match self.send_locked(&mut inner, message, false, std::ptr::null(), &mut wake) {
            Ok(()) => {
                drop(inner);
                wake.wake();
                Ok(())
            }
            Err(TrySendError::Disconnected(m)) => {
                drop(inner);
                wake.wake();
                Err(SendTimeoutError::Disconnected(m))
            }
            // Still under the lock: a fiber registers without taking it
            // again.
            Err(TrySendError::Full(m)) => self.send_waiting(m, Some((inner, wake)), deadline),
        }
    }

    /// The rest of `send`, `held` the lock (and its wake-ups) of a try that
    /// found no room.
    #[inline(never)]
    fn send_waiting(
        &self,
        message: T,
        held: Option<(MutexGuard<'_, Inner<T>>, Wakeups)>,
        deadline: Option<u64>,
    ) -> Result<(), SendTimeoutError<T>> {
        let mut message = message;
        let mut held = held;
        if crate::scheduler::context::current().is_none() {
            if let Some((inner, wake)) = held.take() {
                drop(inner);
                wake.wake();
            }
            // A thread spins a moment first: a wait that ends within
            // microseconds is cheaper than a sleep in the kernel and the
            // wake-up after it. (A fiber parks at once: others run.)
            let mut spin = Backoff::default();
            while spin.snooze() {
                match self.try_send(message) {
                    Ok(()) => return Ok(()),
                    Err(TrySendError::Disconnected(m)) => {
                        return Err(SendTimeoutError::Disconnected(m));
                    }
                    Err(TrySendError::Full(m)) => message = m,
                }
                if deadline.is_some_and(|d| d <= clock::now_ns()) {
                    break;
                }
            }
        }
        loop {
            let (mut inner, mut wake) = match held.take() {
                // Tried just now under this lock: no room.
                Some(held) => held,
                None => {
                    let mut wake = Wakeups::default();
                    let mut inner = self.lock();
                    match self.send_locked(&mut inner, message, false, std::ptr::null(), &mut wake)
                    {
                        Ok(()) => {
                            drop(inner);
                            wake.wake();
                            return Ok(());
                        }
                        Err(TrySendError::Disconnected(m)) => {
                            drop(inner);
                            wake.wake();
                            return Err(SendTimeoutError::Disconnected(m));
                        }
                        Err(TrySendError::Full(m)) => message = m,
                    }
                    (inner, wake)
                }
            };
            if deadline.is_some_and(|d| d <= clock::now_ns()) {
                drop(inner);
                wake.wake();
                return Err(SendTimeoutError::Timeout(message));
            }
            let cx = Context::single();
            let slot: Slot<T> = UnsafeCell::new(Some(message));
            inner
                .senders
                .register(&cx, 0, Kind::Packet(slot.get().cast()));
            // A receive from a channel of capacity 0 may go ahead now.
            inner.receivers.wake_watchers(&mut wake);
            drop(inner);
            wake.wake();
            let on_unwind = OnUnwind::new(&cx, |_| {
                // Taken: sent. Not taken: the send did not happen, and the
                // message goes down with the fiber.
                self.lock().senders.unregister(&cx, 0);
            });
            let selected = wait(&cx, deadline, &"channel send", false);
            on_unwind.defuse();
            match selected {
                Selected::Operation(_) => return Ok(()),
                Selected::Disconnected => {
                    let m = slot.into_inner().expect("not taken");
                    return Err(SendTimeoutError::Disconnected(m));
                }
                _ => {
                    self.lock().senders.unregister(&cx, 0);
                    message = slot.into_inner().expect("not taken");
                }
            }
        }
    }

    /// Receives, waiting for a message until `deadline` (the wait in a
    /// frame of its own, as in `send`).
    pub(crate) fn recv(&self, deadline: Option<u64>) -> Result<T, RecvTimeoutError> {
        let mut wake = Wakeups::default();
        let mut inner = self.lock();
        match self.recv_locked(&mut inner, std::ptr::null(), &mut wake) {
            Ok(got) => {
                drop(inner);
                wake.wake();
                match got.settle(self) {
                    Some(m) => Ok(m),
                    None => self.recv_waiting(None, deadline), // a promise broken
                }
            }
            Err(TryRecvError::Disconnected) => {
                drop(inner);
                wake.wake();
                Err(RecvTimeoutError::Disconnected)
            }
            // Still under the lock: a fiber registers without taking it
            // again.
            Err(TryRecvError::Empty) => self.recv_waiting(Some((inner, wake)), deadline),
        }
    }

    /// The rest of `recv`, `held` the lock (and its wake-ups) of a try that
    /// found nothing.
    #[inline(never)]
    fn recv_waiting(
        &self,
        held: Option<(MutexGuard<'_, Inner<T>>, Wakeups)>,
        deadline: Option<u64>,
    ) -> Result<T, RecvTimeoutError> {
        let mut held = held;
        if crate::scheduler::context::current().is_none() {
            if let Some((inner, wake)) = held.take() {
                drop(inner);
                wake.wake();
            }
            // As in `send`: a thread spins a moment first.
            let mut spin = Backoff::default();
            while spin.snooze() {
                match self.try_recv() {
                    Ok(m) => return Ok(m),
                    Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                    Err(TryRecvError::Empty) => {}
                }
                if deadline.is_some_and(|d| d <= clock::now_ns()) {
                    break;
                }
            }
        }
        loop {
            let (mut inner, mut wake) = match held.take() {
                // Tried just now under this lock: nothing.
                Some(held) => held,
                None => {
                    let mut wake = Wakeups::default();
                    let mut inner = self.lock();
                    match self.recv_locked(&mut inner, std::ptr::null(), &mut wake) {
                        Ok(got) => {
                            drop(inner);
                            wake.wake();
                            match got.settle(self) {
                                Some(m) => return Ok(m),
                                None => continue, // a promise broken: again
                            }
                        }
                        Err(TryRecvError::Disconnected) => {
                            drop(inner);
                            wake.wake();
                            return Err(RecvTimeoutError::Disconnected);
                        }
                        Err(TryRecvError::Empty) => {}
                    }
                    (inner, wake)
                }
            };
            if deadline.is_some_and(|d| d <= clock::now_ns()) {
                drop(inner);
                wake.wake();
                return Err(RecvTimeoutError::Timeout);
            }
            let cx = Context::single();
            let slot: RecvSlot<T> = UnsafeCell::new(None);
            inner
                .receivers
                .register(&cx, 0, Kind::Packet(slot.get().cast()));
            // A send to a channel of capacity 0 may go ahead now.
            inner.senders.wake_watchers(&mut wake);
            drop(inner);
            wake.wake();
            let on_unwind = OnUnwind::new(&cx, |selected| {
                self.lock().receivers.unregister(&cx, 0);
                if let Selected::Operation(_) = selected
                    // SAFETY: the wait is over (aborted or finished), so no
                    // notifier touches the slot any more.
                    && let Some(got) = unsafe { (*slot.get()).take() }
                {
                    got.give_back(self);
                }
            });
            let selected = wait(&cx, deadline, &"channel receive", false);
            on_unwind.defuse();
            match selected {
                Selected::Operation(_) => {
                    let got = slot.into_inner().expect("a message was handed over");
                    match got.settle(self) {
                        Some(m) => return Ok(m),
                        None => continue, // a promise broken: again
                    }
                }
                // Look again: the queue may still hold messages.
                Selected::Disconnected => {}
                _ => {
                    self.lock().receivers.unregister(&cx, 0);
                }
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
fn drop_one_by_one<T>(queue: VecDeque<T>) {
    let mut queue = std::mem::ManuallyDrop::new(queue);
    while let Some(message) = queue.pop_front() {
        drop(message);
    }
    // Empty now: only its buffer is freed.
    drop(std::mem::ManuallyDrop::into_inner(queue));
}

/// A thread's short wait before it parks: spins that double, then yields
/// of the thread; `snooze` says whether to try once more.
#[derive(Default)]
struct Backoff {
    step: u32,
}

impl Backoff {
    const SPIN_STEPS: u32 = 6;
    const YIELD_STEPS: u32 = 10;

    fn snooze(&mut self) -> bool {
        if self.step <= Self::SPIN_STEPS {
            for _ in 0..1u32 << self.step {
                std::hint::spin_loop();
            }
        } else if self.step <= Self::YIELD_STEPS {
            std::thread::yield_now();
        } else {
            return false;
        }
        self.step += 1;
        true
    }
}
