//! The flavors without a lock, [`Array`] and [`List`]: `bounded(n)` for
//! n ≥ 1 (a ring of slots, [`ArraySlots`]) and `unbounded()` (a list of
//! blocks of slots, [`ListSlots`]), as crossbeam-channel's `array` and
//! `list` flavors, each a [`Queue`] of its slots: the storage, a [`SyncWaker`]
//! of waiters per side that only a wait takes, and the messages given
//! back.
//!
//! # Claims
//!
//! A send claims a place (moving the tail on with a compare-exchange),
//! writes its message, then publishes it; a receive claims a published
//! message (moving the head on), reads it, then frees its place. A claim
//! and its completion are two steps a `select` takes apart (its token
//! holds the claim): a `select!` arm's send makes its message only once the
//! send is chosen. Another party that meets a claimed place not yet
//! completed waits for it ([`Pause`](crate::channel::backoff::Pause)).
//!
//! A claimed send that is never completed (the arm unwound, the
//! `SelectedOperation` was dropped) writes a *hole*, which receives pass
//! over. A claimed receive never completed gives its message back
//! (`returned`), ahead of the storage: the message is not lost, and its
//! order among the others is what it would have been had the receiver
//! taken it and sent it back. Once a receive has been told the channel is
//! over (`Queue::tell_over`), nothing is given back any more: the end is
//! final.
//!
//! # Waiting
//!
//! See `ops.rs`: blocking sends and receives wait with a packet and are
//! handed over to, as Go's; a `select` is woken to try again.

use std::collections::VecDeque;

use crate::atomic::{AtomicUsize, Mutex, Ordering};

use crate::channel::context::{Context, Kind};
use crate::channel::flavors::zero::drop_one_by_one;
use crate::channel::ready_cell::{ReadyCell, Watched};
use crate::channel::waker::SyncWaker;

mod array;
mod list;
mod list_block;
#[cfg(all(test, loom))]
mod models;
mod ops;

pub(crate) use array::ArraySlots;
pub(crate) use list::ListSlots;

/// A `bounded(n)` channel without a lock.
pub(crate) type Array<T> = Queue<ArraySlots<T>>;
/// An `unbounded()` channel without a lock.
pub(crate) type List<T> = Queue<ListSlots<T>>;

/// A place claimed in a storage: to write (a send) or read (a receive).
/// Valid while its channel is, completed at most once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Claim {
    slot: *const (),
    pos: usize,
}

/// Why a claim could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoClaim {
    /// Full (a send) or empty (a receive).
    NotReady,
    Disconnected,
}

/// A storage of messages without a lock: the ring or the list.
pub(crate) trait Slots {
    type Message;

    /// Claims a place for a send. `wait_for_readers`: a place a receive
    /// claimed and is still reading is waited for; otherwise it ends the
    /// search as `NotReady` (for a caller that must not wait: one between
    /// `claim` and `finish` of a waiter's context).
    fn start_send(&self, wait_for_readers: bool) -> Result<Claim, NoClaim>;

    /// Writes `message` into a place claimed for a send, and publishes it.
    ///
    /// # Safety
    ///
    /// `claim` was made by this storage's `start_send` and is completed
    /// here for the first and only time.
    unsafe fn write(&self, claim: Claim, message: Self::Message);

    /// Completes a claimed send without a message: a hole.
    ///
    /// # Safety
    ///
    /// As for [`Slots::write`].
    unsafe fn write_hole(&self, claim: Claim);

    /// Claims a message for a receive, passing over holes (`freed` is set
    /// when it passed one: a place was freed). `wait_for_writers`: a place
    /// a send claimed and has not written is waited for; otherwise it
    /// ends the search as `NotReady` — only where no other receive can run
    /// (the last receiver dropping): a list looks at the head's block
    /// before claiming, which another receive could free.
    fn start_recv(&self, wait_for_writers: bool, freed: &mut bool) -> Result<Claim, NoClaim>;

    /// Reads the message of a place claimed for a receive and frees it.
    ///
    /// # Safety
    ///
    /// `claim` was made by this storage's `start_recv` and is completed
    /// here for the first and only time.
    unsafe fn read(&self, claim: Claim) -> Self::Message;

    /// Marks the storage disconnected; `true` the first time.
    fn disconnect(&self) -> bool;
    /// Nothing stored or claimed, and not disconnected.
    fn is_drained(&self) -> bool;
    /// Whether a receive would find something (or the disconnection).
    fn recv_ready(&self) -> bool;
    /// Whether a send would find room (or the disconnection).
    fn send_ready(&self) -> bool;
    fn is_full(&self) -> bool;
    /// Messages stored (claimed ones included).
    fn len(&self) -> usize;
    fn capacity(&self) -> Option<usize>;
}

/// The messages given back, and whether a receive was told the end.
struct Returned<M> {
    messages: VecDeque<M>,
    over: bool,
}

pub(crate) struct Queue<S: Slots> {
    slots: S,
    /// Messages given back by a `select` that took and could not use them,
    /// received before the storage's.
    returned: Mutex<Returned<S::Message>>,
    returned_len: AtomicUsize,
    pub(crate) receivers_waker: SyncWaker,
    pub(crate) senders_waker: SyncWaker,
    pub(crate) senders: AtomicUsize,
    pub(crate) receivers: AtomicUsize,
    /// The readiness fd, once a receiver asked for one (`ready_cell.rs`).
    pub(crate) ready: ReadyCell,
}

impl<S: Slots> Queue<S> {
    pub(crate) fn new(slots: S) -> Queue<S> {
        Queue {
            slots,
            returned: Mutex::new(Returned {
                messages: VecDeque::new(),
                over: false,
            }),
            returned_len: AtomicUsize::new(0),
            receivers_waker: SyncWaker::new(),
            senders_waker: SyncWaker::new(),
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
            ready: ReadyCell::new(),
        }
    }

    pub(crate) fn start_send(&self, wait_for_readers: bool) -> Result<Claim, NoClaim> {
        self.slots.start_send(wait_for_readers)
    }

    /// Writes a claimed send and tells the receivers.
    ///
    /// # Safety
    ///
    /// As for [`Slots::write`].
    pub(crate) unsafe fn write(&self, claim: Claim, message: S::Message) {
        // SAFETY: the caller's contract.
        unsafe { self.slots.write(claim, message) };
        self.receivers_waker.notify();
    }

    /// # Safety
    ///
    /// As for [`Slots::write`].
    pub(crate) unsafe fn write_hole(&self, claim: Claim) {
        // SAFETY: the caller's contract.
        unsafe { self.slots.write_hole(claim) };
    }

    pub(crate) fn start_recv(&self, wait_for_writers: bool) -> Result<Claim, NoClaim> {
        let mut freed = false;
        let claim = self.slots.start_recv(wait_for_writers, &mut freed);
        if freed {
            self.room_made();
        }
        claim
    }

    /// Reads a claimed receive and tells the senders.
    ///
    /// # Safety
    ///
    /// As for [`Slots::read`].
    pub(crate) unsafe fn read(&self, claim: Claim) -> S::Message {
        // SAFETY: the caller's contract.
        let message = unsafe { self.slots.read(claim) };
        self.room_made();
        message
    }

    /// A message given back, if any (ahead of the storage's).
    pub(crate) fn take_returned(&self) -> Option<S::Message> {
        if self.returned_len.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut returned = self.returned.lock().unwrap_or_else(|e| e.into_inner());
        let message = returned.messages.pop_front()?;
        self.returned_len
            .store(returned.messages.len(), Ordering::SeqCst);
        Some(message)
    }

    /// A receive found the storage disconnected and empty: whether it may
    /// tell its caller the channel is over. Not if a message was given
    /// back meanwhile (take it first). Once told, the end is final: a
    /// message given back after it goes down with the receiver that got it
    /// and unwound, as one it had taken would (see [`Queue::give_back`]).
    pub(crate) fn tell_over(&self) -> bool {
        let mut returned = self.returned.lock().unwrap_or_else(|e| e.into_inner());
        returned.over = returned.messages.is_empty();
        returned.over
    }

    /// Gives back a message a receive took and cannot use; `Err` with it
    /// when every receiver is gone, or once a receive has been told the
    /// channel is over ([`Queue::tell_over`]).
    pub(crate) fn give_back(&self, message: S::Message) -> Result<(), S::Message> {
        if self.receivers.load(Ordering::Acquire) == 0 {
            return Err(message);
        }
        // Nothing is handed to a waiting receiver while `returned` holds a
        // message (`is_drained`), so no one waits for this one: notified,
        // a waiter tries again and finds it.
        {
            let mut returned = self.returned.lock().unwrap_or_else(|e| e.into_inner());
            if returned.over {
                return Err(message);
            }
            returned.messages.push_back(message);
            self.returned_len
                .store(returned.messages.len(), Ordering::SeqCst);
        }
        self.receivers_waker.notify();
        Ok(())
    }

    /// Whether nothing is stored or given back (a message may be handed
    /// straight to a waiting receiver); false once disconnected.
    fn is_drained(&self) -> bool {
        self.returned_len.load(Ordering::SeqCst) == 0 && self.slots.is_drained()
    }

    pub(crate) fn recv_ready(&self) -> bool {
        self.returned_len.load(Ordering::SeqCst) != 0 || self.slots.recv_ready()
    }

    pub(crate) fn send_ready(&self) -> bool {
        self.slots.send_ready()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.slots.is_full()
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len() + self.returned_len.load(Ordering::SeqCst)
    }

    pub(crate) fn capacity(&self) -> Option<usize> {
        self.slots.capacity()
    }

    /// Every sender (`receivers_gone` false) or every receiver is gone:
    /// marks the storage, wakes every waiter; with no receivers left, drops
    /// the messages that can be taken now (a place still being written is
    /// left, with what follows, to the storage's drop).
    pub(crate) fn disconnect(&self, receivers_gone: bool) {
        if self.slots.disconnect() {
            self.senders_waker.disconnect();
            self.receivers_waker.disconnect();
        }
        if receivers_gone {
            let mut dropped: VecDeque<S::Message> = std::mem::take(
                &mut self
                    .returned
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .messages,
            );
            self.returned_len.store(0, Ordering::SeqCst);
            let mut freed = false;
            while let Ok(claim) = self.slots.start_recv(false, &mut freed) {
                // SAFETY: claimed just now from this storage.
                dropped.push_back(unsafe { self.slots.read(claim) });
            }
            drop_one_by_one(dropped);
        }
    }
}

/// A readiness fd's watcher in the receivers' line (see `ready_cell.rs`),
/// armed as a `select` registers: the line's flag raised in the one total
/// order, then the positions looked at (`waker.rs`).
impl<S: Slots> Watched for Queue<S> {
    fn cell(&self) -> &ReadyCell {
        &self.ready
    }

    fn arm(&self, watch: &Context) -> bool {
        self.receivers_waker.unregister(watch, 0);
        // Out of the line under its lock: no notifier can claim it now.
        watch.reset();
        self.receivers_waker.register(watch, 0, Kind::Watch);
        self.recv_ready()
    }

    fn disarm(&self, watch: &Context) {
        self.receivers_waker.unregister(watch, 0);
    }
}

/// A lock-free channel as a `select` and a `SelectedOperation` see it,
/// whichever its storage: one code for both flavors, each call a match
/// whose arms inline (a `dyn` face cost a select of four operations a
/// dozen calls that could not).
pub(crate) enum QueueRef<'a, T> {
    Array(&'a Array<T>),
    List(&'a List<T>),
}

impl<T> Clone for QueueRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for QueueRef<'_, T> {}

/// `$body` with `$q` bound to the queue, whichever its storage.
macro_rules! each {
    ($self:expr, $q:ident => $body:expr) => {
        match $self {
            QueueRef::Array($q) => $body,
            QueueRef::List($q) => $body,
        }
    };
}

impl<T> QueueRef<'_, T> {
    #[inline]
    pub(crate) fn identity(self) -> *const u8 {
        each!(self, q => std::ptr::from_ref(q).cast())
    }

    #[inline]
    pub(crate) fn start_send(self) -> Result<Claim, NoClaim> {
        each!(self, q => q.start_send(true))
    }

    /// # Safety
    ///
    /// As for [`Slots::write`].
    #[inline]
    pub(crate) unsafe fn write(self, claim: Claim, message: T) {
        // SAFETY: the caller's contract.
        each!(self, q => unsafe { q.write(claim, message) })
    }

    /// # Safety
    ///
    /// As for [`Slots::write`].
    #[inline]
    pub(crate) unsafe fn write_hole(self, claim: Claim) {
        // SAFETY: the caller's contract.
        each!(self, q => unsafe { q.write_hole(claim) })
    }

    #[inline]
    pub(crate) fn start_recv(self) -> Result<Claim, NoClaim> {
        each!(self, q => q.start_recv(true))
    }

    /// # Safety
    ///
    /// As for [`Slots::read`].
    #[inline]
    pub(crate) unsafe fn read(self, claim: Claim) -> T {
        // SAFETY: the caller's contract.
        each!(self, q => unsafe { q.read(claim) })
    }

    #[inline]
    pub(crate) fn take_returned(self) -> Option<T> {
        each!(self, q => q.take_returned())
    }

    pub(crate) fn tell_over(self) -> bool {
        each!(self, q => q.tell_over())
    }

    pub(crate) fn give_back(self, message: T) -> Result<(), T> {
        each!(self, q => q.give_back(message))
    }

    pub(crate) fn register(self, recv: bool, oper: usize, cx: &Context, kind: Kind) -> bool {
        each!(self, q => q.register(recv, oper, cx, kind))
    }

    pub(crate) fn unregister(self, recv: bool, oper: usize, cx: &Context) {
        each!(self, q => q.unregister(recv, oper, cx))
    }

    pub(crate) fn pass_on(self, recv: bool) {
        each!(self, q => q.pass_on(recv))
    }

    #[inline]
    pub(crate) fn side_ready(self, recv: bool) -> bool {
        each!(self, q => q.side_ready(recv))
    }
}
