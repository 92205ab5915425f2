//! [`Sender`]: the sending side of a channel.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::channel::err::{SendError, SendTimeoutError, TrySendError};
use crate::channel::flavors::lockfree::{Array, List, QueueRef};
use crate::channel::flavors::zero::Zero;
use crate::timer::clock;

/// The sending side of a channel; clone it for more senders (the channel
/// is multi-producer, multi-consumer). When the last sender is dropped the
/// channel is disconnected: receivers take what is left, then get
/// `Disconnected`.
///
/// In a fiber a send that waits (no room) parks the fiber; on a plain
/// thread it blocks the thread. Fibers of any runtime and threads may
/// share a channel.
///
/// ```
/// use fibra::channel::bounded;
///
/// fibra::run(|| {
///     let (s, r) = bounded(1);
///     let s2 = s.clone();
///     let a = fibra::spawn(move || s.send("a").unwrap());
///     let b = fibra::spawn(move || s2.send("b").unwrap());
///     let mut got = [r.recv().unwrap(), r.recv().unwrap()];
///     got.sort();
///     assert_eq!(got, ["a", "b"]);
///     a.join().unwrap();
///     b.join().unwrap();
/// });
/// ```
pub struct Sender<T> {
    pub(crate) flavor: SenderFlavor<T>,
}

/// The channel a sender feeds: the ring of a buffered channel, or the
/// locked one (see `channel::make`).
pub(crate) enum SenderFlavor<T> {
    Zero(Arc<Zero<T>>),
    Array(Arc<Array<T>>),
    List(Arc<List<T>>),
}

impl<T> SenderFlavor<T> {
    /// The lock-free channel behind the sender, if it is one.
    #[inline]
    pub(crate) fn queue(&self) -> Option<QueueRef<'_, T>> {
        match self {
            SenderFlavor::Array(q) => Some(QueueRef::Array(q)),
            SenderFlavor::List(q) => Some(QueueRef::List(q)),
            SenderFlavor::Zero(_) => None,
        }
    }

    /// The channel's address: equal for two senders of one channel (what
    /// `same_channel` and a select's operations compare).
    pub(crate) fn identity(&self) -> *const u8 {
        match self {
            SenderFlavor::Zero(chan) => Arc::as_ptr(chan).cast(),
            queue => queue.queue().expect("a queue").identity(),
        }
    }
}

/// `$body` with `$c` bound to the sender's channel, whichever it is (both
/// have the methods a sender calls, by the same names).
macro_rules! on_chan {
    ($flavor:expr, $c:ident => $body:expr) => {
        match $flavor {
            SenderFlavor::Zero($c) => $body,
            SenderFlavor::Array($c) => $body,
            SenderFlavor::List($c) => $body,
        }
    };
}

impl<T> Sender<T> {
    /// Sends without waiting.
    ///
    /// # Errors
    ///
    /// `Full` when there is no room (for a channel of capacity 0: no
    /// receiver waiting), `Disconnected` when every receiver is gone; both
    /// give the message back.
    ///
    /// ```
    /// let (s, r) = fibra::channel::bounded(1);
    /// assert_eq!(s.try_send(1), Ok(()));
    /// assert_eq!(s.try_send(2), Err(fibra::channel::TrySendError::Full(2)));
    /// drop(r);
    /// assert_eq!(s.try_send(3), Err(fibra::channel::TrySendError::Disconnected(3)));
    /// ```
    pub fn try_send(&self, msg: T) -> Result<(), TrySendError<T>> {
        let sent = on_chan!(&self.flavor, c => c.try_send(msg));
        if sent.is_err() {
            // A loop of these waiting for a fiber of this thread lets it run.
            crate::scheduler::fair::futile();
        }
        sent
    }

    /// Sends, waiting for room if the channel is full (for a channel of
    /// capacity 0, until a receiver takes the message).
    ///
    /// # Errors
    ///
    /// When every receiver is gone, with the message.
    pub fn send(&self, msg: T) -> Result<(), SendError<T>> {
        let sent = match &self.flavor {
            SenderFlavor::List(c) => {
                // Never waits: a loop of these lets the receivers of its
                // thread run now and then.
                crate::scheduler::fair::never_waited();
                c.send(msg, None)
            }
            SenderFlavor::Zero(c) if c.is_unbounded() => {
                crate::scheduler::fair::never_waited();
                c.send(msg, None)
            }
            flavor => on_chan!(flavor, c => c.send(msg, None)),
        };
        sent.map_err(|e| SendError(e.into_inner()))
    }

    /// [`send`](Sender::send), waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// `Timeout` or `Disconnected`, with the message.
    pub fn send_timeout(&self, msg: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        let deadline = Some(clock::after_ns(timeout));
        on_chan!(&self.flavor, c => c.send(msg, deadline))
    }

    /// [`send`](Sender::send), waiting at most until `deadline`.
    ///
    /// # Errors
    ///
    /// `Timeout` or `Disconnected`, with the message.
    pub fn send_deadline(&self, msg: T, deadline: Instant) -> Result<(), SendTimeoutError<T>> {
        let deadline = Some(clock::instant_ns(deadline));
        on_chan!(&self.flavor, c => c.send(msg, deadline))
    }

    /// Whether the channel holds no message.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the channel has no room (always, for capacity 0).
    pub fn is_full(&self) -> bool {
        on_chan!(&self.flavor, c => c.is_full())
    }

    /// The messages in the channel.
    pub fn len(&self) -> usize {
        on_chan!(&self.flavor, c => c.len())
    }

    /// The capacity; `None` for an unbounded channel.
    pub fn capacity(&self) -> Option<usize> {
        on_chan!(&self.flavor, c => c.capacity())
    }

    /// Whether both senders belong to one channel.
    pub fn same_channel(&self, other: &Sender<T>) -> bool {
        self.flavor.identity() == other.flavor.identity()
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Sender<T> {
        let flavor = match &self.flavor {
            SenderFlavor::Zero(c) => {
                c.senders.fetch_add(1, Ordering::Relaxed);
                SenderFlavor::Zero(c.clone())
            }
            SenderFlavor::Array(c) => {
                c.senders.fetch_add(1, Ordering::Relaxed);
                SenderFlavor::Array(c.clone())
            }
            SenderFlavor::List(c) => {
                c.senders.fetch_add(1, Ordering::Relaxed);
                SenderFlavor::List(c.clone())
            }
        };
        Sender { flavor }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        on_chan!(&self.flavor, c => {
            if c.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
                c.disconnect(false);
            }
        })
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Sender { .. }")
    }
}

impl<T> std::panic::UnwindSafe for Sender<T> {}
impl<T> std::panic::RefUnwindSafe for Sender<T> {}
