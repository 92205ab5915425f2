//! [`Receiver`]: the receiving side of a channel, and its iterators.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::channel::err::{RecvError, RecvTimeoutError, TryRecvError};
use crate::channel::flavors::lockfree::{Array, List, QueueRef};
use crate::channel::flavors::timers::{At, Tick, sleep_until};
use crate::channel::flavors::zero::{Got, Zero};
use crate::channel::ready_cell::Watched;
use crate::timer::clock;

/// The receiving side of a channel; clone it for more receivers (each
/// message goes to one of them). When the last receiver is dropped the
/// channel is disconnected: sends fail and give their message back, and
/// the messages left in the channel are dropped.
///
/// In a fiber a receive that waits parks the fiber; on a plain thread it
/// blocks the thread.
///
/// ```
/// use fibra::channel::unbounded;
///
/// // A worker pool on one shared queue: each job to one worker.
/// fibra::run(|| {
///     let (jobs, queue) = unbounded::<u32>();
///     let (done, results) = unbounded();
///     let workers: Vec<_> = (0..4)
///         .map(|_| {
///             let (queue, done) = (queue.clone(), done.clone());
///             fibra::spawn(move || {
///                 for job in queue {
///                     done.send(job * 2).unwrap();
///                 }
///             })
///         })
///         .collect();
///     for job in 0..100 {
///         jobs.send(job).unwrap();
///     }
///     drop(jobs); // the workers' loops end when the queue is empty
///     for w in workers {
///         w.join().unwrap();
///     }
///     drop(done);
///     assert_eq!(results.iter().sum::<u32>(), 9900);
/// });
/// ```
pub struct Receiver<T> {
    pub(crate) flavor: ReceiverFlavor<T>,
}

pub(crate) enum ReceiverFlavor<T> {
    Zero(Arc<Zero<T>>),
    /// A buffered channel's ring (see `channel::make`).
    Array(Arc<Array<T>>),
    /// An unbounded channel's list (see `channel::make`).
    List(Arc<List<T>>),
    /// `after` and `at`: `T` is `Instant`, made by the function.
    At(Arc<At>, fn(Instant) -> T),
    /// `tick`: likewise.
    Tick(Arc<Tick>, fn(Instant) -> T),
    Never,
}

impl<T> ReceiverFlavor<T> {
    /// The lock-free channel behind the receiver, if it is one.
    #[inline]
    pub(crate) fn queue(&self) -> Option<QueueRef<'_, T>> {
        match self {
            ReceiverFlavor::Array(q) => Some(QueueRef::Array(q)),
            ReceiverFlavor::List(q) => Some(QueueRef::List(q)),
            _ => None,
        }
    }
}

impl<T> Receiver<T> {
    /// Completes a receive a `select` chose: its message, waited for if a
    /// send was paired with it and is making it (a promise broken: receives
    /// again).
    pub(crate) fn settle(&self, got: Got<T>) -> Result<T, RecvError> {
        match (got, &self.flavor) {
            (Got::Message(m), _) => Ok(m),
            (got, ReceiverFlavor::Zero(chan)) => match got.settle(chan) {
                Some(m) => Ok(m),
                None => self.recv(),
            },
            (Got::Promised(_), _) => unreachable!("only channels pair"),
        }
    }

    /// Receives without waiting.
    ///
    /// # Errors
    ///
    /// `Empty` when there is nothing to take now, `Disconnected` when the
    /// channel is also without senders.
    ///
    /// ```
    /// use fibra::channel::{TryRecvError, unbounded};
    ///
    /// let (s, r) = unbounded();
    /// assert_eq!(r.try_recv(), Err(TryRecvError::Empty));
    /// s.send(5).unwrap();
    /// drop(s);
    /// assert_eq!(r.try_recv(), Ok(5));
    /// assert_eq!(r.try_recv(), Err(TryRecvError::Disconnected));
    /// ```
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let got = self.try_recv_once();
        if got.is_err() {
            // A loop of these waiting for a fiber of this thread lets it run.
            crate::scheduler::fair::futile();
        }
        got
    }

    /// [`try_recv`](Receiver::try_recv) without the fairness count.
    fn try_recv_once(&self) -> Result<T, TryRecvError> {
        match &self.flavor {
            ReceiverFlavor::Zero(chan) => emptied(&**chan, chan.try_recv()),
            ReceiverFlavor::Array(ring) => emptied(&**ring, ring.try_recv()),
            ReceiverFlavor::List(list) => emptied(&**list, list.try_recv()),
            ReceiverFlavor::At(at, make) => at.try_recv().map(|ns| make(clock::ns_instant(ns))),
            ReceiverFlavor::Tick(tick, make) => {
                tick.try_recv().map(|ns| make(clock::ns_instant(ns)))
            }
            ReceiverFlavor::Never => Err(TryRecvError::Empty),
        }
    }

    /// Receives, waiting until a message comes.
    ///
    /// # Errors
    ///
    /// When the channel is empty and every sender is gone.
    pub fn recv(&self) -> Result<T, RecvError> {
        self.recv_until(None).map_err(|_| RecvError)
    }

    /// [`recv`](Receiver::recv), waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// `Timeout`, or `Disconnected` when the channel is empty and every
    /// sender is gone.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fibra::channel::{RecvTimeoutError, bounded};
    ///
    /// let (_s, r) = bounded::<u8>(0);
    /// let waited = r.recv_timeout(Duration::from_millis(5));
    /// assert_eq!(waited, Err(RecvTimeoutError::Timeout));
    /// ```
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_until(Some(clock::after_ns(timeout)))
    }

    /// [`recv`](Receiver::recv), waiting at most until `deadline`.
    ///
    /// # Errors
    ///
    /// As [`recv_timeout`](Receiver::recv_timeout).
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.recv_until(Some(clock::instant_ns(deadline)))
    }

    fn recv_until(&self, deadline: Option<u64>) -> Result<T, RecvTimeoutError> {
        match &self.flavor {
            ReceiverFlavor::Zero(chan) => chan.recv(deadline),
            ReceiverFlavor::Array(ring) => ring.recv(deadline),
            ReceiverFlavor::List(list) => list.recv(deadline),
            ReceiverFlavor::At(at, make) => at.recv(deadline).map(|ns| make(clock::ns_instant(ns))),
            ReceiverFlavor::Tick(tick, make) => {
                tick.recv(deadline).map(|ns| make(clock::ns_instant(ns)))
            }
            ReceiverFlavor::Never => {
                sleep_until(deadline);
                Err(RecvTimeoutError::Timeout)
            }
        }
    }

    /// Whether the channel holds no message now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the channel has no room (always, for capacity 0 and
    /// `never`).
    pub fn is_full(&self) -> bool {
        match &self.flavor {
            ReceiverFlavor::Zero(chan) => chan.is_full(),
            ReceiverFlavor::Array(ring) => ring.is_full(),
            ReceiverFlavor::List(list) => list.is_full(),
            ReceiverFlavor::At(at, _) => at.len() == 1,
            ReceiverFlavor::Tick(tick, _) => tick.len() == 1,
            ReceiverFlavor::Never => true,
        }
    }

    /// The messages in the channel now (a due `after` or `tick` is one).
    pub fn len(&self) -> usize {
        match &self.flavor {
            ReceiverFlavor::Zero(chan) => chan.len(),
            ReceiverFlavor::Array(ring) => ring.len(),
            ReceiverFlavor::List(list) => list.len(),
            ReceiverFlavor::At(at, _) => at.len(),
            ReceiverFlavor::Tick(tick, _) => tick.len(),
            ReceiverFlavor::Never => 0,
        }
    }

    /// The capacity: `None` for an unbounded channel, `Some(1)` for
    /// `after`, `at` and `tick`, `Some(0)` for `never`.
    pub fn capacity(&self) -> Option<usize> {
        match &self.flavor {
            ReceiverFlavor::Zero(chan) => chan.capacity(),
            ReceiverFlavor::Array(ring) => ring.capacity(),
            ReceiverFlavor::List(list) => list.capacity(),
            ReceiverFlavor::At(..) | ReceiverFlavor::Tick(..) => Some(1),
            ReceiverFlavor::Never => Some(0),
        }
    }

    /// A blocking iterator: each [`recv`](Receiver::recv) until the channel
    /// is empty and disconnected.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { receiver: self }
    }

    /// An iterator over the messages there now, without waiting.
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { receiver: self }
    }

    /// Whether both receivers belong to one channel (two `never`s do).
    pub fn same_channel(&self, other: &Receiver<T>) -> bool {
        match (&self.flavor, &other.flavor) {
            (ReceiverFlavor::Zero(a), ReceiverFlavor::Zero(b)) => Arc::ptr_eq(a, b),
            (ReceiverFlavor::Array(a), ReceiverFlavor::Array(b)) => Arc::ptr_eq(a, b),
            (ReceiverFlavor::List(a), ReceiverFlavor::List(b)) => Arc::ptr_eq(a, b),
            (ReceiverFlavor::At(a, _), ReceiverFlavor::At(b, _)) => Arc::ptr_eq(a, b),
            (ReceiverFlavor::Tick(a, _), ReceiverFlavor::Tick(b, _)) => Arc::ptr_eq(a, b),
            (ReceiverFlavor::Never, ReceiverFlavor::Never) => true,
            _ => false,
        }
    }
}

/// A `try_recv`'s result, after it re-armed the channel's readiness fd
/// (if it has one) when it found the channel empty: the drain of an outer
/// loop ends there (see [`Receiver::ready_fd`]). Without an fd, one
/// relaxed load on the empty path.
#[inline]
fn emptied<C: Watched, T>(channel: &C, result: Result<T, TryRecvError>) -> Result<T, TryRecvError> {
    if let Err(TryRecvError::Empty) = result {
        channel.cell().after_empty(channel);
    }
    result
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Receiver<T> {
        let flavor = match &self.flavor {
            ReceiverFlavor::Zero(chan) => {
                chan.receivers.fetch_add(1, Ordering::Relaxed);
                ReceiverFlavor::Zero(chan.clone())
            }
            ReceiverFlavor::Array(ring) => {
                ring.receivers.fetch_add(1, Ordering::Relaxed);
                ReceiverFlavor::Array(ring.clone())
            }
            ReceiverFlavor::List(list) => {
                list.receivers.fetch_add(1, Ordering::Relaxed);
                ReceiverFlavor::List(list.clone())
            }
            ReceiverFlavor::At(at, make) => ReceiverFlavor::At(at.clone(), *make),
            ReceiverFlavor::Tick(tick, make) => ReceiverFlavor::Tick(tick.clone(), *make),
            ReceiverFlavor::Never => ReceiverFlavor::Never,
        };
        Receiver { flavor }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        match &self.flavor {
            ReceiverFlavor::Zero(chan) if chan.receivers.fetch_sub(1, Ordering::AcqRel) == 1 => {
                chan.disconnect(true);
            }
            ReceiverFlavor::Array(ring) if ring.receivers.fetch_sub(1, Ordering::AcqRel) == 1 => {
                ring.disconnect(true);
            }
            ReceiverFlavor::List(list) if list.receivers.fetch_sub(1, Ordering::AcqRel) == 1 => {
                list.disconnect(true);
            }
            _ => {}
        }
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Receiver { .. }")
    }
}

impl<T> std::panic::UnwindSafe for Receiver<T> {}
impl<T> std::panic::RefUnwindSafe for Receiver<T> {}

/// The blocking iterator of [`Receiver::iter`].
pub struct Iter<'a, T> {
    receiver: &'a Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.receiver.recv().ok()
    }
}

impl<T> std::iter::FusedIterator for Iter<'_, T> {}

impl<T> fmt::Debug for Iter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Iter { .. }")
    }
}

/// The non-blocking iterator of [`Receiver::try_iter`].
pub struct TryIter<'a, T> {
    receiver: &'a Receiver<T>,
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.receiver.try_recv().ok()
    }
}

impl<T> fmt::Debug for TryIter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("TryIter { .. }")
    }
}

/// The owning blocking iterator of a [`Receiver`].
pub struct IntoIter<T> {
    receiver: Receiver<T>,
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.receiver.recv().ok()
    }
}

impl<T> std::iter::FusedIterator for IntoIter<T> {}

impl<T> fmt::Debug for IntoIter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("IntoIter { .. }")
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;

    fn into_iter(self) -> IntoIter<T> {
        IntoIter { receiver: self }
    }
}

/// What a `recv(r) -> msg` arm of [`select!`](crate::select) accepts: a
/// [`Receiver`], or a face on one — [`sync::mpsc`](crate::sync::mpsc)'s
/// and [`sync::oneshot`](crate::sync::oneshot)'s receivers — reached
/// through references as a method call reaches it (so `recv(&r)` is
/// `recv(r)`).
///
/// ```
/// use fibra::sync::{mpsc, oneshot};
///
/// let (tx, rx) = mpsc::channel();
/// let (_done_tx, done_rx) = oneshot::channel::<()>();
/// tx.send(7).unwrap();
/// let got = fibra::select! {
///     recv(rx) -> msg => msg.unwrap(),
///     recv(done_rx) -> _ => 0,
/// };
/// assert_eq!(got, 7);
/// ```
#[diagnostic::on_unimplemented(
    message = "`recv(..)` in `select!` takes a channel receiver, not `{Self}`",
    label = "an arm of this `select!` takes a `{Self}`",
    note = "a `recv` arm takes a `fibra::channel::Receiver`, a `sync::mpsc` or `sync::oneshot` receiver, or anything that derefs to one (`&r`, `Arc<Receiver<T>>`, ...)"
)]
pub trait SelectRecv<T> {
    /// The channel receiver the arm waits on.
    fn select_receiver(&self) -> &Receiver<T>;
}

impl<T> SelectRecv<T> for Receiver<T> {
    fn select_receiver(&self) -> &Receiver<T> {
        self
    }
}
