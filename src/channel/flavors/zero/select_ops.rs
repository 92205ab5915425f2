//! The channel's side of a `select`: trying an operation on its behalf,
//! registering its waits and watchers, and taking back what it was given
//! and could not use.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Got, Inner, Promise, Zero, put};
use crate::channel::context::{Context, Kind, Selected};
use crate::channel::err::{TryRecvError, TrySendError};
use crate::channel::ready_cell::{ReadyCell, Watched};
use crate::scheduler::wakeups::Wakeups;

/// What registering an operation of a `select` came to; `D` is what an
/// operation that went ahead at once hands over (a channel's result here,
/// the select's [`Token`](crate::channel::select::operation::Token) above).
pub(crate) enum Registration<D> {
    /// Registered: the select may park.
    Waiting,
    /// Not registered: the operation looked ready, but the select must
    /// look again (its context is aborted, or another of its operations
    /// was chosen meanwhile, which `Context::abort` then says).
    Ready,
    /// The operation was ready and went ahead here, under the channel's
    /// lock, after the select's context was aborted: no other operation
    /// of the select can be chosen any more. Only a locked channel does
    /// this, which lets a select of only such operations skip its try
    /// pass.
    Done(D),
}

impl<D> Registration<D> {
    /// The same outcome, what went ahead made into `f`'s.
    pub(crate) fn map_done<E>(self, f: impl FnOnce(D) -> E) -> Registration<E> {
        match self {
            Registration::Waiting => Registration::Waiting,
            Registration::Ready => Registration::Ready,
            Registration::Done(d) => Registration::Done(f(d)),
        }
    }
}

/// A `select`'s send that may go ahead.
pub(crate) enum SendGo<T> {
    /// Room is reserved for its message (a buffered channel).
    Reserved,
    /// It is paired with a waiting receiver (capacity 0).
    Promised(Arc<Promise<T>>),
}

impl<T> Zero<T> {
    /// A `select`'s receive, tried: a message (or its promise), `Err(())`
    /// when disconnected and empty, or `None` (would wait).
    pub(crate) fn select_recv(&self, me: *const Context) -> Option<Result<Got<T>, ()>> {
        let mut wake = Wakeups::default();
        let result = self.recv_locked(&mut self.lock(), me, &mut wake);
        wake.wake();
        match result {
            Ok(m) => Some(Ok(m)),
            Err(TryRecvError::Disconnected) => Some(Err(())),
            Err(TryRecvError::Empty) => None,
        }
    }

    /// A `select`'s send, tried: `Ok` with room reserved for the message
    /// or paired with a waiting receiver, `Err(())` when disconnected, or
    /// `None` (would wait).
    pub(crate) fn select_send(&self, me: *const Context) -> Option<Result<SendGo<T>, ()>> {
        let mut wake = Wakeups::default();
        let result = self.select_send_locked(&mut self.lock(), me, &mut wake);
        wake.wake();
        result
    }

    fn select_send_locked(
        &self,
        inner: &mut Inner<T>,
        me: *const Context,
        wake: &mut Wakeups,
    ) -> Option<Result<SendGo<T>, ()>> {
        if inner.disconnected {
            return Some(Err(()));
        }
        if self.cap != 0 {
            if inner.queue.len() + inner.reserved < self.cap {
                inner.reserved += 1;
                return Some(Ok(SendGo::Reserved));
            }
            return None;
        }
        let taker = inner.receivers.take_first(me, |e| {
            matches!(e.kind(), Kind::Packet(_)) && e.cx().claim()
        });
        let entry = taker?;
        let Kind::Packet(packet) = entry.kind() else {
            unreachable!("only packets are taken")
        };
        let promise = Promise::new();
        // SAFETY: claimed just now under our lock, a receiver's slot of
        // this channel's `T`.
        unsafe { put(packet, Got::Promised(promise.clone())) };
        wake.push(entry.finish());
        Some(Ok(SendGo::Promised(promise)))
    }

    fn send_ready(&self, inner: &Inner<T>, me: *const Context) -> bool {
        inner.disconnected
            || inner.queue.len() + inner.reserved < self.cap
            || inner.receivers.any(me, |k| matches!(k, Kind::Packet(_)))
    }

    fn recv_ready(&self, inner: &Inner<T>, me: *const Context) -> bool {
        let rendezvous = self.cap == 0;
        inner.disconnected
            || !inner.queue.is_empty()
            || inner.senders.any(me, |k| match k {
                Kind::Packet(_) => true,
                Kind::Lazy(_) => rendezvous,
                Kind::Watch | Kind::Notify => false,
            })
    }

    /// Sends with room reserved by [`Zero::select_send`] (or given by a
    /// receiver to a waiting `select`).
    pub(crate) fn send_reserved(&self, message: T) -> Result<(), T> {
        let mut wake = Wakeups::default();
        let result = self.send_locked(&mut self.lock(), message, true, std::ptr::null(), &mut wake);
        wake.wake();
        result.map_err(TrySendError::into_inner)
    }

    /// Gives back room reserved for a send that will not come.
    pub(crate) fn release_reserved(&self) {
        let mut wake = Wakeups::default();
        let mut inner = self.lock();
        inner.reserved -= 1;
        self.admit_sender(&mut inner, std::ptr::null(), &mut wake);
        if inner.queue.len() + inner.reserved < self.cap {
            inner.senders.wake_watchers(&mut wake);
        }
        drop(inner);
        wake.wake();
    }

    /// Gives back a message a receive got but cannot keep: to the next
    /// waiting receiver, or the queue's front. `Err` with the message when
    /// every receiver is gone (a send's promise whose receiver left), or
    /// once a receive has been told the channel is over (`Inner::over`).
    pub(crate) fn give_back(&self, message: T) -> Result<(), T> {
        let mut wake = Wakeups::default();
        let mut inner = self.lock();
        if self.receivers.load(Ordering::Acquire) == 0 || inner.over {
            return Err(message);
        }
        self.give_back_locked(&mut inner, message, &mut wake);
        drop(inner);
        wake.wake();
        Ok(())
    }

    /// Registers a `select`'s receive into `packet` (a `*mut Slot<T>`),
    /// or, if it can go ahead now, completes it for the select whose
    /// context `cx` is (see [`Registration`]).
    pub(crate) fn register_recv(
        &self,
        oper: usize,
        cx: &Context,
        packet: *mut (),
    ) -> Registration<Result<Got<T>, ()>> {
        let mut wake = Wakeups::default();
        let mut inner = self.lock();
        let registered = if self.recv_ready(&inner, cx) {
            if cx.abort() != Selected::Aborted {
                return Registration::Ready;
            }
            match self.recv_locked(&mut inner, cx, &mut wake) {
                Ok(got) => Registration::Done(Ok(got)),
                Err(TryRecvError::Disconnected) => Registration::Done(Err(())),
                Err(TryRecvError::Empty) => Registration::Ready,
            }
        } else {
            inner.receivers.register(cx, oper, Kind::Packet(packet));
            inner.senders.wake_watchers(&mut wake);
            Registration::Waiting
        };
        drop(inner);
        wake.wake();
        registered
    }

    /// Registers a `select`'s send (its message not made yet), with the
    /// slot its promise is written to on a channel of capacity 0 (a
    /// `*mut PromiseSlot<T>`), or, if it can go ahead now, lets it go for
    /// the select whose context `cx` is (see [`Registration`]).
    pub(crate) fn register_send(
        &self,
        oper: usize,
        cx: &Context,
        slot: *mut (),
    ) -> Registration<Result<SendGo<T>, ()>> {
        let mut wake = Wakeups::default();
        let mut inner = self.lock();
        let registered = if self.send_ready(&inner, cx) {
            if cx.abort() != Selected::Aborted {
                return Registration::Ready;
            }
            match self.select_send_locked(&mut inner, cx, &mut wake) {
                Some(result) => Registration::Done(result),
                None => Registration::Ready,
            }
        } else {
            inner.senders.register(cx, oper, Kind::Lazy(slot));
            inner.receivers.wake_watchers(&mut wake);
            Registration::Waiting
        };
        drop(inner);
        wake.wake();
        registered
    }

    /// Registers a watcher of the receive (`recv`) or send side, unless
    /// that side is ready now (`false`).
    pub(crate) fn watch(&self, recv: bool, oper: usize, cx: &Context) -> bool {
        let mut inner = self.lock();
        if recv {
            if self.recv_ready(&inner, cx) {
                return false;
            }
            inner.receivers.register(cx, oper, Kind::Watch);
        } else {
            if self.send_ready(&inner, cx) {
                return false;
            }
            inner.senders.register(cx, oper, Kind::Watch);
        }
        true
    }

    /// Whether a receive (`recv`) or a send would go ahead now.
    pub(crate) fn is_ready(&self, recv: bool) -> bool {
        let inner = self.lock();
        if recv {
            self.recv_ready(&inner, std::ptr::null())
        } else {
            self.send_ready(&inner, std::ptr::null())
        }
    }

    /// Removes what `oper` of `cx` registered on the receive (`recv`) or
    /// send side, if still there.
    pub(crate) fn unregister(&self, recv: bool, oper: usize, cx: &Context) {
        let mut inner = self.lock();
        let line = if recv {
            &mut inner.receivers
        } else {
            &mut inner.senders
        };
        line.unregister(cx, oper);
    }
}

/// A readiness fd's watcher in the line of waiting receivers (see
/// `ready_cell.rs`), armed under the channel's lock: registered and looked
/// at in one hold.
impl<T> Watched for Zero<T> {
    fn cell(&self) -> &ReadyCell {
        &self.ready
    }

    fn arm(&self, watch: &Context) -> bool {
        let mut inner = self.lock();
        inner.receivers.unregister(watch, 0);
        // Out of the line under its lock: no notifier can claim it now.
        watch.reset();
        inner.receivers.register(watch, 0, Kind::Watch);
        self.recv_ready(&inner, std::ptr::null())
    }

    fn disarm(&self, watch: &Context) {
        self.lock().receivers.unregister(watch, 0);
    }
}
