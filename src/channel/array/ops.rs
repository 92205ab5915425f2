//! The operations of a ring channel: tries, and sends and receives that
//! wait (registered in their side's [`Line`](crate::channel::line::Line),
//! woken to try again), and what a `select` registers.

use crate::channel::backoff::Backoff;
use crate::channel::context::{Context, Kind, OnUnwind, Selected, wait};
use crate::channel::err::{RecvTimeoutError, SendTimeoutError, TryRecvError, TrySendError};
use crate::timer::clock;

use super::{Array, NoClaim};

impl<T> Array<T> {
    pub(crate) fn try_send(&self, message: T) -> Result<(), TrySendError<T>> {
        match self.start_send() {
            Ok(claim) => {
                // SAFETY: claimed just now from this ring, completed once.
                unsafe { self.write(claim, message) };
                Ok(())
            }
            Err(NoClaim::NotReady) => Err(TrySendError::Full(message)),
            Err(NoClaim::Disconnected) => Err(TrySendError::Disconnected(message)),
        }
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
    pub(crate) fn send(&self, message: T, deadline: Option<u64>) -> Result<(), SendTimeoutError<T>> {
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
        let on_thread = crate::scheduler::context::current().is_none();
        loop {
            if on_thread {
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
            if deadline.is_some_and(|d| d <= clock::now_ns()) {
                return Err(SendTimeoutError::Timeout(message));
            }
            self.wait_turn(false, deadline);
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
        let on_thread = crate::scheduler::context::current().is_none();
        loop {
            if on_thread {
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
            if deadline.is_some_and(|d| d <= clock::now_ns()) {
                return Err(RecvTimeoutError::Timeout);
            }
            self.wait_turn(true, deadline);
            match self.try_recv() {
                Ok(m) => return Ok(m),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
        }
    }

    /// Waits (until `deadline`) for the receive (`recv`) or send side to
    /// be told it may go ahead; returns at once if it may now. The caller
    /// tries again either way.
    fn wait_turn(&self, recv: bool, deadline: Option<u64>) {
        let (line, what) = if recv {
            (&self.receivers_line, &"channel receive")
        } else {
            (&self.senders_line, &"channel send")
        };
        let cx = Context::single();
        line.register(&cx, 0, Kind::Notify);
        if self.side_ready(recv) {
            line.unregister(&cx, 0);
            return;
        }
        let on_unwind = OnUnwind::new(&cx, |selected| {
            line.unregister(&cx, 0);
            // Woken for a turn we will not take: the next waiter takes it.
            if let Selected::Operation(_) = selected {
                line.notify();
            }
        });
        let selected = wait(&cx, deadline, what, false);
        on_unwind.defuse();
        match selected {
            // Taken out of the line by the notifier, or by the disconnection.
            Selected::Operation(_) | Selected::Disconnected => {}
            _ => line.unregister(&cx, 0),
        }
    }

    fn side_ready(&self, recv: bool) -> bool {
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
            self.senders_line.notify();
        }
    }
}
