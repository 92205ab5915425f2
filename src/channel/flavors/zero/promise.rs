//! A rendezvous made before its message exists: a `select`'s send on a
//! channel of capacity 0, paired with one receiver.
//!
//! A `select!` arm `send(s, expr)` makes its message only once the send is
//! chosen, and on a channel of capacity 0 the send is chosen *by* a
//! receiver (or chooses a waiting receiver). The two are then bound to each
//! other: the receiver waits for that very message — not any other sender's
//! — and the message goes to that very receiver, never into the channel's
//! (zero-sized) buffer where its own sender could receive it back. That is
//! crossbeam's rendezvous, and what makes `send(s, r.recv().unwrap())` in a
//! `select!` work: the receive inside the expression is served by another
//! sender, not by the one its select was paired with.
//!
//! A [`Promise`] is the bond: made by whichever side pairs the two, under
//! the channel's lock, and shared by both. It ends one of three ways:
//!
//! - the sender keeps it (the arm made the message): the receiver takes it;
//! - the sender breaks it (its `SelectedOperation` was dropped, or the arm
//!   unwound before the message was made): the receiver starts its receive
//!   again, as if never paired;
//! - the receiver abandons it (cancelled or timed out by `fibra::timeout`
//!   while it waits): the sender's message goes to the next receiver, or
//!   back into the channel — never lost.
//!
//! Once paired, a receiver waits for the message past its own deadline (the
//! receive was served in time; its message is being made), as crossbeam's
//! does.

use std::sync::Arc;

use super::Zero;
use crate::channel::spin_lock::{SpinGuard, SpinLock};
use crate::scheduler::park::{RawUnparker, park_current};
use crate::scheduler::wait_on::WaitOn;

/// The bond between a `select`'s send and the receiver it was paired with
/// (see the module docs).
pub(crate) struct Promise<T> {
    state: SpinLock<State<T>>,
}

struct State<T> {
    phase: Phase<T>,
    /// The receiver's next park, once it waits.
    /// Without a reference count: made into an `Unparker` under the
    /// lock, while the receiver cannot leave (it leaves once it sees,
    /// under this lock, a phase other than `Pending`, or by `abandon`,
    /// which takes the lock too).
    waiter: Option<RawUnparker>,
}

enum Phase<T> {
    Pending,
    Kept(T),
    Broken,
    Abandoned,
}

/// What a receive that went ahead got: a message, or a promise of one.
pub(crate) enum Got<T> {
    Message(T),
    Promised(Arc<Promise<T>>),
}

impl<T> Promise<T> {
    pub(crate) fn new() -> Arc<Promise<T>> {
        Arc::new(Promise {
            state: SpinLock::new(State {
                phase: Phase::Pending,
                waiter: None,
            }),
        })
    }

    fn lock(&self) -> SpinGuard<'_, State<T>> {
        // No user code runs under the lock (a message's drop happens after
        // it).
        self.state.lock()
    }

    /// The sender's side: delivers `message` to the paired receiver, or,
    /// if it left, to the channel (the next receiver, or the queue's
    /// front). `Err` with the message only when every receiver is gone.
    #[inline(never)]
    pub(crate) fn keep(&self, chan: &Zero<T>, message: T) -> Result<(), T> {
        let mut state = self.lock();
        match state.phase {
            Phase::Pending => {
                state.phase = Phase::Kept(message);
                // SAFETY: under the lock: the receiver sees the new phase
                // only once it is released, so it has not ended its park
                // (see the field).
                let waiter = state.waiter.take().map(|w| unsafe { w.pinned() });
                drop(state);
                if let Some(w) = waiter {
                    w.unpark();
                }
                Ok(())
            }
            Phase::Abandoned => {
                drop(state);
                chan.give_back(message)
            }
            Phase::Kept(_) | Phase::Broken => unreachable!("a promise is kept or broken once"),
        }
    }

    /// The sender's side: no message will come; the receiver receives
    /// again.
    pub(crate) fn break_off(&self) {
        let mut state = self.lock();
        if let Phase::Pending = state.phase {
            state.phase = Phase::Broken;
            // SAFETY: as in `keep`.
            let waiter = state.waiter.take().map(|w| unsafe { w.pinned() });
            drop(state);
            if let Some(w) = waiter {
                w.unpark();
            }
        }
    }

    /// The receiver's side: gives the promise up; a message already kept
    /// goes back to `chan` (its next receiver, or its queue's front).
    #[inline(never)]
    pub(crate) fn abandon(&self, chan: &Zero<T>) {
        let mut state = self.lock();
        let phase = std::mem::replace(&mut state.phase, Phase::Abandoned);
        drop(state);
        if let Phase::Kept(message) = phase {
            // A receiver gives back only while receivers exist (itself).
            let _ = chan.give_back(message);
        }
    }

    /// The receiver's side: parks until the sender keeps the promise (the
    /// message) or breaks it (`None`: receive again). Unwinding at the park
    /// (cancel, `fibra::timeout`) abandons it.
    #[inline(never)] // rare: out of the frames of every receive
    pub(crate) fn wait(&self, chan: &Zero<T>) -> Option<T> {
        let on_unwind = AbandonOnUnwind {
            promise: self,
            chan,
        };
        let got = loop {
            let mut state = self.lock();
            match std::mem::replace(&mut state.phase, Phase::Pending) {
                Phase::Kept(message) => break Some(message),
                Phase::Broken => break None,
                Phase::Pending => state.waiter = Some(RawUnparker::current()),
                Phase::Abandoned => unreachable!("only the receiver abandons"),
            }
            drop(state);
            park_current(
                None,
                WaitOn::Sync(&"channel receive (its send is being made)"),
            );
        };
        std::mem::forget(on_unwind);
        got
    }
}

/// Abandons a promise whose receiver unwinds while it waits; forgotten on
/// the normal way out.
struct AbandonOnUnwind<'a, T> {
    promise: &'a Promise<T>,
    chan: &'a Zero<T>,
}

impl<T> Drop for AbandonOnUnwind<'_, T> {
    fn drop(&mut self) {
        self.promise.abandon(self.chan);
    }
}

impl<T> Got<T> {
    /// The message, waited for if promised; `None` when the promise was
    /// broken (the caller receives again).
    pub(crate) fn settle(self, chan: &Zero<T>) -> Option<T> {
        match self {
            Got::Message(m) => Some(m),
            Got::Promised(p) => p.wait(chan),
        }
    }

    /// A receive that will not be completed gives back what it got.
    pub(crate) fn give_back(self, chan: &Zero<T>) {
        match self {
            Got::Message(m) => {
                let _ = chan.give_back(m);
            }
            Got::Promised(p) => p.abandon(chan),
        }
    }
}
