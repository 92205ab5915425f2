//! The operations of a ring channel: tries, and sends and receives that
//! wait, and what a `select` registers.
//!
//! A blocking send or receive waits in its side's line with a packet, as
//! Go's goroutines wait on a channel with a `sudog`: a sender that finds a
//! receiver waiting on an empty ring hands its message straight over, and
//! a receiver that makes room moves the first waiting sender's message into
//! the ring. A waiter so served never runs again for that message: between
//! fibers of one thread, a message costs no switch of its own. A `select`
//! waits without a packet (`Notify`): it is woken to try again.

use std::cell::UnsafeCell;

use crate::channel::backoff::Backoff;
use crate::channel::context::{Context, Kind, OnUnwind, Selected, wait};
use crate::channel::err::{RecvTimeoutError, SendTimeoutError, TryRecvError, TrySendError};
use crate::sync::waiters::Wakeups;
use crate::timer::clock;

use super::{Array, NoClaim};

/// A waiter's packet: a sender's message until it is sent, or what a
/// receiver is handed.
type Packet<T> = UnsafeCell<Option<T>>;

/// Writes `value` into the packet behind a claimed entry's pointer.
///
/// # Safety
///
/// `packet` is the `*mut Packet<T>` of an entry the caller claimed
/// (`Context::claim`) and has not finished.
unsafe fn put<T>(packet: *mut (), value: T) {
    // SAFETY: the caller's contract: the waiter looks at its packet only
    // after `finish`, and keeps it alive until then (context.rs).
    unsafe { *packet.cast::<Option<T>>() = Some(value) };
}

/// Takes the value out of a claimed entry's packet.
///
/// # Safety
///
/// As for [`put`].
unsafe fn take<T>(packet: *mut ()) -> Option<T> {
    // SAFETY: as for `put`.
    unsafe { (*packet.cast::<Option<T>>()).take() }
}

impl<T> Array<T> {
    pub(crate) fn try_send(&self, message: T) -> Result<(), TrySendError<T>> {
        let message = if self.receivers_line.maybe_waiting() {
            match self.hand_over(message) {
                Ok(()) => return Ok(()),
                Err(m) => m,
            }
        } else {
            message
        };
        self.push(message, true)
    }

    /// Sends into the ring (no hand-over).
    fn push(&self, message: T, wait_for_readers: bool) -> Result<(), TrySendError<T>> {
        match self.start_send(wait_for_readers) {
            Ok(claim) => {
                // SAFETY: claimed just now from this ring, completed once.
                unsafe { self.write(claim, message) };
                Ok(())
            }
            Err(NoClaim::NotReady) => Err(TrySendError::Full(message)),
            Err(NoClaim::Disconnected) => Err(TrySendError::Disconnected(message)),
        }
    }

    /// Hands `message` to the first receiver waiting with a packet, if the
    /// ring is empty (a message in the ring goes first).
    #[cold]
    #[inline(never)]
    fn hand_over(&self, message: T) -> Result<(), T> {
        let Some(entry) = self.receivers_line.claim_packet(|| self.is_drained()) else {
            return Err(message);
        };
        let Kind::Packet(packet) = entry.kind() else {
            unreachable!("only packets are claimed")
        };
        // SAFETY: claimed just now, a waiting receiver's `Packet<T>`.
        unsafe { put(packet, message) };
        entry.cx().finish(Selected::Operation(entry.oper()));
        let mut wake = Wakeups::default();
        wake.push(entry.into_unparker());
        wake.wake();
        Ok(())
    }

    /// After a receive made room: the first waiting sender's message moves
    /// into the ring (or a waiting `select` is told to try).
    pub(super) fn room_made(&self) {
        if self.senders_line.maybe_waiting() {
            self.admit_sender();
        }
    }

    #[cold]
    #[inline(never)]
    fn admit_sender(&self) {
        let Some(entry) = self.senders_line.take_first() else {
            return;
        };
        if let Kind::Packet(packet) = entry.kind() {
            // SAFETY: claimed by `take_first`, a waiting sender's
            // `Packet<T>` holding its message.
            let message = unsafe { take::<T>(packet) }.expect("a waiting sender's message");
            // Not waiting for a reader here: the sender's context is
            // claimed and must be finished without a park.
            if let Err(e) = self.push(message, false) {
                // Another sender was faster: it tries again itself.
                // SAFETY: as above.
                unsafe { put(packet, e.into_inner()) };
            }
            entry.cx().finish(Selected::Operation(entry.oper()));
        }
        let mut wake = Wakeups::default();
        wake.push(entry.into_unparker());
        wake.wake();
    }

    pub(crate) fn try_recv(&self) -> Result<T, TryRecvError> {
        if let Some(message) = self.take_returned() {
            return Ok(message);
        }
        match self.start_recv(true) {
            // SAFETY: claimed just now from this ring, completed once.
            Ok(claim) => Ok(unsafe { self.read(claim) }),
            Err(NoClaim::NotReady) => Err(TryRecvError::Empty),
            Err(NoClaim::Disconnected) => Err(TryRecvError::Disconnected),
        }
    }

    /// Sends, waiting for room until `deadline`.
    pub(crate) fn send(
        &self,
        message: T,
        deadline: Option<u64>,
    ) -> Result<(), SendTimeoutError<T>> {
        match self.try_send(message) {
            Ok(()) => Ok(()),
            Err(TrySendError::Disconnected(m)) => Err(SendTimeoutError::Disconnected(m)),
            Err(TrySendError::Full(m)) => self.send_waiting(m, deadline),
        }
    }

    /// The rest of `send`, in a frame of its own (a large message is not
    /// copied into the frame of a send that goes straight through).
    #[inline(never)]
    fn send_waiting(&self, message: T, deadline: Option<u64>) -> Result<(), SendTimeoutError<T>> {
        let mut message = message;
        if crate::scheduler::context::current().is_none() {
            // A thread spins a moment first (see `chan/waits.rs`).
            let mut spin = Backoff::default();
            while spin.snooze() {
                match self.try_send(message) {
                    Ok(()) => return Ok(()),
                    Err(TrySendError::Disconnected(m)) => {
                        return Err(SendTimeoutError::Disconnected(m));
                    }
                    Err(TrySendError::Full(m)) => message = m,
                }
            }
        }
        loop {
            if deadline.is_some_and(|d| d <= clock::now_ns()) {
                return Err(SendTimeoutError::Timeout(message));
            }
            let cx = Context::single();
            let packet: Packet<T> = UnsafeCell::new(Some(message));
            let line = &self.senders_line;
            line.register(&cx, 0, Kind::Packet(packet.get().cast()));
            if self.send_ready() {
                line.unregister(&cx, 0);
                cx.abort();
            } else {
                let on_unwind = OnUnwind::new(&cx, |selected| {
                    line.unregister(&cx, 0);
                    // Woken for room we will not use: the next sender's.
                    // (Moved into the ring already: sent.)
                    // SAFETY: the wait is over: no notifier touches the
                    // packet any more.
                    if selected != Selected::Aborted && unsafe { (*packet.get()).is_some() } {
                        self.room_made();
                    }
                });
                let selected = wait(&cx, deadline, &"channel send", false);
                on_unwind.defuse();
                if selected == Selected::Aborted {
                    line.unregister(&cx, 0);
                }
            }
            match packet.into_inner() {
                // A receiver moved it into the ring.
                None => return Ok(()),
                Some(m) => message = m,
            }
            match self.try_send(message) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Disconnected(m)) => {
                    return Err(SendTimeoutError::Disconnected(m));
                }
                Err(TrySendError::Full(m)) => message = m,
            }
        }
    }

    /// Receives, waiting for a message until `deadline`.
    pub(crate) fn recv(&self, deadline: Option<u64>) -> Result<T, RecvTimeoutError> {
        match self.try_recv() {
            Ok(m) => Ok(m),
            Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) => self.recv_waiting(deadline),
        }
    }

    #[inline(never)]
    fn recv_waiting(&self, deadline: Option<u64>) -> Result<T, RecvTimeoutError> {
        if crate::scheduler::context::current().is_none() {
            let mut spin = Backoff::default();
            while spin.snooze() {
                match self.try_recv() {
                    Ok(m) => return Ok(m),
                    Err(TryRecvError::Disconnected) => {
                        return Err(RecvTimeoutError::Disconnected);
                    }
                    Err(TryRecvError::Empty) => {}
                }
            }
        }
        loop {
            if deadline.is_some_and(|d| d <= clock::now_ns()) {
                return Err(RecvTimeoutError::Timeout);
            }
            let cx = Context::single();
            let packet: Packet<T> = UnsafeCell::new(None);
            let line = &self.receivers_line;
            line.register(&cx, 0, Kind::Packet(packet.get().cast()));
            if self.recv_ready() {
                line.unregister(&cx, 0);
                cx.abort();
            } else {
                let on_unwind = OnUnwind::new(&cx, |selected| {
                    line.unregister(&cx, 0);
                    // SAFETY: the wait is over: no notifier touches the
                    // packet any more.
                    match unsafe { (*packet.get()).take() } {
                        // Handed a message we cannot keep: back, ahead of
                        // the ring (every receiver gone: it goes down).
                        Some(m) => drop(self.give_back(m)),
                        // Woken for a message we will not take: the next
                        // receiver's turn.
                        None if selected != Selected::Aborted => self.receivers_line.notify(),
                        None => {}
                    }
                });
                let selected = wait(&cx, deadline, &"channel receive", false);
                on_unwind.defuse();
                if selected == Selected::Aborted {
                    line.unregister(&cx, 0);
                }
            }
            if let Some(m) = packet.into_inner() {
                return Ok(m);
            }
            match self.try_recv() {
                Ok(m) => return Ok(m),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
        }
    }

    /// Whether a receive would find something (or the disconnection).
    pub(crate) fn side_ready(&self, recv: bool) -> bool {
        if recv {
            self.recv_ready()
        } else {
            self.send_ready()
        }
    }

    /// Registers operation `oper` of a `select` (`kind`: `Notify`, or
    /// `Watch` for a `ready`) on the receive (`recv`) or send side, unless
    /// that side may go ahead now (`false`, not registered).
    pub(crate) fn register(&self, recv: bool, oper: usize, cx: &Context, kind: Kind) -> bool {
        let line = if recv {
            &self.receivers_line
        } else {
            &self.senders_line
        };
        line.register(cx, oper, kind);
        if self.side_ready(recv) {
            line.unregister(cx, oper);
            return false;
        }
        true
    }

    /// Removes what `oper` of `cx` registered on a side.
    pub(crate) fn unregister(&self, recv: bool, oper: usize, cx: &Context) {
        if recv {
            self.receivers_line.unregister(cx, oper);
        } else {
            self.senders_line.unregister(cx, oper);
        }
    }

    /// Passes on a turn a `select` was woken for and does not take.
    pub(crate) fn pass_on(&self, recv: bool) {
        if recv {
            self.receivers_line.notify();
        } else {
            self.room_made();
        }
    }
}
