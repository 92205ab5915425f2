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
use crate::timer::clock;

use super::{NoClaim, Queue, Slots};

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

/// The message a path holds (its absence is a bug of this file).
fn unwrap<T>(slot: Option<T>) -> T {
    slot.expect("the message is in its slot")
}

impl<S: Slots> Queue<S> {
    // The paths below keep one copy of a message at a time, in a slot
    // they pass by reference (`&mut Option<S::Message>`, a waiter's packet): a
    // message may be large and a fiber's stack is small.

    pub(crate) fn try_send(&self, message: S::Message) -> Result<(), TrySendError<S::Message>> {
        let mut slot = Some(message);
        match self.offer(&mut slot, true) {
            Ok(()) => Ok(()),
            Err(NoClaim::NotReady) => Err(TrySendError::Full(unwrap(slot))),
            Err(NoClaim::Disconnected) => Err(TrySendError::Disconnected(unwrap(slot))),
        }
    }

    /// Sends the message in `slot`, taking it: to a receiver waiting on an
    /// empty ring, or into the ring. Left in `slot` when it cannot.
    fn offer(&self, slot: &mut Option<S::Message>, wait_for_readers: bool) -> Result<(), NoClaim> {
        // A hand-over only into an empty storage (looked at first without
        // the line's lock: senders that find messages queued and a receiver
        // still registered, about to be woken, do not all take it).
        if self.receivers_waker.maybe_waiting() && self.is_drained() && self.hand_over(slot) {
            return Ok(());
        }
        let claim = self.start_send(wait_for_readers)?;
        // SAFETY: claimed just now from this ring, completed once.
        unsafe { self.write(claim, unwrap(slot.take())) };
        Ok(())
    }

    /// Hands the message in `slot` to the first receiver waiting with a
    /// packet, if the ring is empty (a message in the ring goes first).
    #[cold]
    #[inline(never)]
    fn hand_over(&self, slot: &mut Option<S::Message>) -> bool {
        let Some(entry) = self.receivers_waker.claim_packet(|| self.is_drained()) else {
            return false;
        };
        let Kind::Packet(packet) = entry.kind() else {
            unreachable!("only packets are claimed")
        };
        // SAFETY: claimed just now, a waiting receiver's `Packet<S::Message>`.
        unsafe { put(packet, unwrap(slot.take())) };
        // The line's lock is released: wake it now.
        entry.finish().unpark();
        true
    }

    /// After a receive made room: the first waiting sender's message moves
    /// into the ring (or a waiting `select` is told to try).
    pub(super) fn room_made(&self) {
        if self.senders_waker.maybe_waiting() {
            self.admit_sender();
        }
    }

    #[cold]
    #[inline(never)]
    fn admit_sender(&self) {
        let Some(entry) = self.senders_waker.take_first() else {
            return;
        };
        let unparker = match entry.kind() {
            Kind::Packet(packet) => {
                // SAFETY: claimed by `take_first`: a waiting sender's
                // `Packet<S::Message>` holding its message, ours until
                // `finish`.
                let slot = unsafe { &mut *packet.cast::<Option<S::Message>>() };
                // Not waiting for a reader here: the sender's context is
                // claimed and must be finished without a park. Left in the
                // packet when another sender was faster: it tries again.
                let _ = self.offer(slot, false);
                entry.finish()
            }
            _ => entry.finish(),
        };
        unparker.unpark();
    }

    /// Receives into `out` without waiting.
    fn take_into(&self, out: &mut Option<S::Message>) -> Result<(), NoClaim> {
        loop {
            if let Some(message) = self.take_returned() {
                *out = Some(message);
                return Ok(());
            }
            match self.start_recv(true) {
                Ok(claim) => {
                    // SAFETY: claimed just now from this ring, completed once.
                    *out = Some(unsafe { self.read(claim) });
                    return Ok(());
                }
                // Over, unless a message was given back meanwhile.
                Err(NoClaim::Disconnected) if !self.tell_over() => {}
                Err(e) => return Err(e),
            }
        }
    }

    pub(crate) fn try_recv(&self) -> Result<S::Message, TryRecvError> {
        let mut out = None;
        match self.take_into(&mut out) {
            Ok(()) => Ok(unwrap(out)),
            Err(NoClaim::NotReady) => Err(TryRecvError::Empty),
            Err(NoClaim::Disconnected) => Err(TryRecvError::Disconnected),
        }
    }

    /// Sends, waiting for room until `deadline`.
    pub(crate) fn send(
        &self,
        message: S::Message,
        deadline: Option<u64>,
    ) -> Result<(), SendTimeoutError<S::Message>> {
        let packet: Packet<S::Message> = UnsafeCell::new(Some(message));
        // SAFETY: not registered anywhere yet: ours alone.
        match self.offer(unsafe { &mut *packet.get() }, true) {
            Ok(()) => Ok(()),
            Err(NoClaim::Disconnected) => {
                Err(SendTimeoutError::Disconnected(unwrap(packet.into_inner())))
            }
            Err(NoClaim::NotReady) => self.send_waiting(&packet, deadline),
        }
    }

    /// The rest of `send`, in a frame of its own, its message in `packet`.
    #[inline(never)]
    fn send_waiting(
        &self,
        packet: &Packet<S::Message>,
        deadline: Option<u64>,
    ) -> Result<(), SendTimeoutError<S::Message>> {
        // Used only between waits, where `packet` is registered nowhere.
        let take = || {
            // SAFETY: no notifier touches an unregistered packet.
            unwrap(unsafe { (*packet.get()).take() })
        };
        if crate::scheduler::context::current().is_none() {
            // A thread spins a moment first (see `flavors/zero/waits.rs`).
            let mut spin = Backoff::default();
            while spin.snooze() {
                // SAFETY: as above.
                match self.offer(unsafe { &mut *packet.get() }, true) {
                    Ok(()) => return Ok(()),
                    Err(NoClaim::Disconnected) => {
                        return Err(SendTimeoutError::Disconnected(take()));
                    }
                    Err(NoClaim::NotReady) => {}
                }
            }
        }
        let line = &self.senders_waker;
        loop {
            if deadline.is_some_and(|d| d <= clock::now_ns()) {
                return Err(SendTimeoutError::Timeout(take()));
            }
            let cx = Context::new();
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
            // SAFETY: as above (the wait is over, the entry gone).
            let slot = unsafe { &mut *packet.get() };
            if slot.is_none() {
                // A receiver moved it into the ring.
                return Ok(());
            }
            match self.offer(slot, true) {
                Ok(()) => return Ok(()),
                Err(NoClaim::Disconnected) => return Err(SendTimeoutError::Disconnected(take())),
                Err(NoClaim::NotReady) => {}
            }
        }
    }

    /// Receives, waiting for a message until `deadline`.
    pub(crate) fn recv(&self, deadline: Option<u64>) -> Result<S::Message, RecvTimeoutError> {
        let packet: Packet<S::Message> = UnsafeCell::new(None);
        // SAFETY: not registered anywhere yet: ours alone.
        let result = match self.take_into(unsafe { &mut *packet.get() }) {
            Ok(()) => Ok(()),
            Err(NoClaim::Disconnected) => Err(RecvTimeoutError::Disconnected),
            Err(NoClaim::NotReady) => self.recv_waiting(&packet, deadline),
        };
        result.map(|()| unwrap(packet.into_inner()))
    }

    /// The rest of `recv`: fills `packet`, or says why not.
    #[inline(never)]
    fn recv_waiting(
        &self,
        packet: &Packet<S::Message>,
        deadline: Option<u64>,
    ) -> Result<(), RecvTimeoutError> {
        if crate::scheduler::context::current().is_none() {
            let mut spin = Backoff::default();
            while spin.snooze() {
                // SAFETY: registered nowhere: ours alone.
                match self.take_into(unsafe { &mut *packet.get() }) {
                    Ok(()) => return Ok(()),
                    Err(NoClaim::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                    Err(NoClaim::NotReady) => {}
                }
            }
        }
        let line = &self.receivers_waker;
        loop {
            if deadline.is_some_and(|d| d <= clock::now_ns()) {
                return Err(RecvTimeoutError::Timeout);
            }
            let cx = Context::new();
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
                        // Not reached: a wait handed its message returns
                        // it (`wait`), so the unwind comes after an abort
                        // that won. Given back, not dropped, all the same.
                        Some(m) => {
                            debug_assert!(false, "a handed message met an unwind");
                            drop(self.give_back(m));
                        }
                        // Woken for a message we will not take: the next
                        // receiver's turn.
                        None if selected != Selected::Aborted => self.receivers_waker.notify(),
                        None => {}
                    }
                });
                let selected = wait(&cx, deadline, &"channel receive", false);
                on_unwind.defuse();
                if selected == Selected::Aborted {
                    line.unregister(&cx, 0);
                }
            }
            // SAFETY: the wait is over and the entry gone: ours alone.
            let slot = unsafe { &mut *packet.get() };
            if slot.is_some() {
                return Ok(());
            }
            match self.take_into(slot) {
                Ok(()) => return Ok(()),
                Err(NoClaim::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(NoClaim::NotReady) => {}
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
            &self.receivers_waker
        } else {
            &self.senders_waker
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
            self.receivers_waker.unregister(cx, oper);
        } else {
            self.senders_waker.unregister(cx, oper);
        }
    }

    /// Passes on a turn a `select` was woken for and does not take.
    pub(crate) fn pass_on(&self, recv: bool) {
        if recv {
            self.receivers_waker.notify();
        } else {
            self.room_made();
        }
    }
}
