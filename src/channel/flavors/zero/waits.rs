//! The channel's blocking operations: a send or receive that waits, as a
//! fiber's park or a thread's block (after a short spin), registered in the
//! channel's line of waiters (see `context.rs` for the protocol).

use std::cell::UnsafeCell;

use super::{Inner, RecvSlot, Slot, Zero};
use crate::channel::backoff::Backoff;
use crate::channel::context::{Context, Kind, OnUnwind, Selected, wait};
use crate::channel::err::{RecvTimeoutError, SendTimeoutError, TryRecvError, TrySendError};
use crate::channel::spin_lock::SpinGuard;
use crate::scheduler::wakeups::Wakeups;
use crate::timer::clock;

impl<T> Zero<T> {
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
            // again. (A send that found no room woke nobody.)
            Err(TrySendError::Full(m)) => {
                debug_assert!(wake.is_empty());
                self.send_waiting(m, Some(inner), deadline)
            }
        }
    }

    /// The rest of `send`, `held` the lock of a try that found no room.
    /// (Only the guard is passed: a tuple with the wake-ups was copied
    /// in wide moves from fields just stored, and stalled.)
    #[inline(never)]
    fn send_waiting(
        &self,
        message: T,
        held: Option<SpinGuard<'_, Inner<T>>>,
        deadline: Option<u64>,
    ) -> Result<(), SendTimeoutError<T>> {
        let mut message = message;
        let mut held = held;
        // A thread of a buffered channel spins a moment first (one of
        // capacity 0 waits for a partner: it registers, then spins).
        if self.cap != 0 && crate::scheduler::context::current().is_none() {
            drop(held.take());
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
                Some(inner) => (inner, Wakeups::default()),
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
            let cx = Context::new();
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
            // again. (A receive that found nothing woke nobody.)
            Err(TryRecvError::Empty) => {
                debug_assert!(wake.is_empty());
                self.recv_waiting(Some(inner), deadline)
            }
        }
    }

    /// The rest of `recv`, `held` the lock of a try that found nothing.
    #[inline(never)]
    fn recv_waiting(
        &self,
        held: Option<SpinGuard<'_, Inner<T>>>,
        deadline: Option<u64>,
    ) -> Result<T, RecvTimeoutError> {
        let mut held = held;
        if self.cap != 0 && crate::scheduler::context::current().is_none() {
            drop(held.take());
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
                Some(inner) => (inner, Wakeups::default()),
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
            let cx = Context::new();
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
}
