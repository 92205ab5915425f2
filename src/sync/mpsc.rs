//! Multi-producer, single-consumer channels with std's interface, whose
//! blocking calls park a fiber (or block a thread).
//!
//! [`channel`] is unbounded: `send` never waits. [`sync_channel`] holds at
//! most `bound` messages: `send` waits for room, and with a bound of 0 it
//! is a rendezvous, each `send` waiting for a `recv` to take its message.
//! The error types are std's own, so code written against
//! `std::sync::mpsc` keeps compiling.
//!
//! Any mix of fibers (of one runtime or several) and threads may send and
//! receive. A receiver that is cancelled just as a message reaches it keeps
//! the message (its `recv` returns it; the cancel lands at its next park):
//! nothing is lost.
//!
//! These are std's faces on [`fibra::channel`](crate::channel), as std's
//! own mpsc is on its copy of crossbeam-channel: one core, so a
//! [`Receiver`] is also a `recv(rx) -> msg` arm of
//! [`fibra::select!`](crate::select), beside `fibra::channel` receivers,
//! joins and fds (the arm's error is the channel's
//! [`RecvError`](crate::channel::RecvError)).
//!
//! ```
//! use fibra::sync::mpsc;
//!
//! fibra::run(|| {
//!     let (tx, rx) = mpsc::channel();
//!     for id in 0..3 {
//!         let tx = tx.clone();
//!         fibra::spawn(move || tx.send(id).unwrap());
//!     }
//!     drop(tx); // the loop below ends when every sender is gone
//!     let mut got: Vec<i32> = rx.iter().collect();
//!     got.sort();
//!     assert_eq!(got, [0, 1, 2]);
//! });
//! ```

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

pub use std::sync::mpsc::{RecvError, RecvTimeoutError, SendError, TryRecvError, TrySendError};

use crate::channel as chan;

/// An unbounded channel: [`Sender::send`] never waits.
///
/// ```
/// let (tx, rx) = fibra::sync::mpsc::channel();
/// tx.send("hi").unwrap();
/// assert_eq!(rx.recv().unwrap(), "hi");
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    // The locked flavor: see `channel::unbounded_locked`.
    let (tx, rx) = chan::unbounded_locked();
    (
        Sender { chan: tx },
        Receiver {
            chan: rx,
            _not_sync: PhantomData,
        },
    )
}

/// A channel of at most `bound` queued messages: [`SyncSender::send`] waits
/// for room. `bound` 0 makes a rendezvous channel, as in std.
///
/// ```
/// use fibra::sync::mpsc::{sync_channel, TrySendError};
///
/// let (tx, rx) = sync_channel(1);
/// tx.send(1).unwrap();
/// assert_eq!(tx.try_send(2), Err(TrySendError::Full(2)));
/// assert_eq!(rx.recv().unwrap(), 1);
/// ```
pub fn sync_channel<T>(bound: usize) -> (SyncSender<T>, Receiver<T>) {
    let (tx, rx) = chan::bounded(bound);
    (
        SyncSender { chan: tx },
        Receiver {
            chan: rx,
            _not_sync: PhantomData,
        },
    )
}

/// The sending half of a [`channel`]; clone it for more producers.
pub struct Sender<T> {
    chan: chan::Sender<T>,
}

/// The sending half of a [`sync_channel`]; clone it for more producers.
pub struct SyncSender<T> {
    chan: chan::Sender<T>,
}

/// The receiving half of a channel. One consumer: it is `Send` but not
/// `Sync` (fibers of one thread may still share it by reference).
///
/// ```compile_fail
/// let (_tx, rx) = fibra::sync::mpsc::channel::<u8>();
/// let rx = std::sync::Arc::new(rx);
/// std::thread::spawn(move || rx.recv());
/// ```
pub struct Receiver<T> {
    chan: chan::Receiver<T>,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

impl<T> Sender<T> {
    /// Queues `message`; never waits.
    ///
    /// # Errors
    ///
    /// Gives the message back if the receiver is gone.
    ///
    /// ```
    /// let (tx, rx) = fibra::sync::mpsc::channel();
    /// drop(rx);
    /// assert_eq!(tx.send(5).unwrap_err().0, 5);
    /// ```
    pub fn send(&self, message: T) -> Result<(), SendError<T>> {
        // Unbounded: never full, so never a wait.
        self.chan.send(message).map_err(|e| SendError(e.0))
    }
}

impl<T> SyncSender<T> {
    /// Queues `message`, waiting for room if the channel is full (for a
    /// rendezvous channel: until a receiver takes it). Parks the fiber, or
    /// blocks the thread.
    ///
    /// # Errors
    ///
    /// Gives the message back if the receiver is gone (also while waiting).
    ///
    /// ```
    /// let (tx, rx) = fibra::sync::mpsc::sync_channel(0);
    /// let t = std::thread::spawn(move || rx.recv().unwrap());
    /// tx.send(9).unwrap(); // returns once the thread has it
    /// assert_eq!(t.join().unwrap(), 9);
    /// ```
    pub fn send(&self, message: T) -> Result<(), SendError<T>> {
        self.chan.send(message).map_err(|e| SendError(e.0))
    }

    /// Queues `message` if there is room now (for a rendezvous channel: if
    /// a receiver is waiting).
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] or [`TrySendError::Disconnected`], with the
    /// message.
    ///
    /// ```
    /// use fibra::sync::mpsc::{sync_channel, TrySendError};
    ///
    /// let (tx, _rx) = sync_channel(0);
    /// assert_eq!(tx.try_send(1), Err(TrySendError::Full(1))); // nobody receiving
    /// ```
    pub fn try_send(&self, message: T) -> Result<(), TrySendError<T>> {
        self.chan.try_send(message).map_err(|e| match e {
            chan::TrySendError::Full(m) => TrySendError::Full(m),
            chan::TrySendError::Disconnected(m) => TrySendError::Disconnected(m),
        })
    }
}

impl<T> Receiver<T> {
    /// Waits for a message: parks the fiber, or blocks the thread.
    ///
    /// # Errors
    ///
    /// [`RecvError`] once the queue is empty and every sender is gone.
    ///
    /// ```
    /// let (tx, rx) = fibra::sync::mpsc::channel::<()>();
    /// drop(tx);
    /// assert!(rx.recv().is_err());
    /// ```
    pub fn recv(&self) -> Result<T, RecvError> {
        self.chan.recv().map_err(|_| RecvError)
    }

    /// A message if one is there now.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`], or [`TryRecvError::Disconnected`] once
    /// empty with every sender gone.
    ///
    /// ```
    /// use fibra::sync::mpsc::{channel, TryRecvError};
    ///
    /// let (tx, rx) = channel();
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    /// tx.send(1).unwrap();
    /// assert_eq!(rx.try_recv(), Ok(1));
    /// ```
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        try_recv(&self.chan)
    }

    /// Waits at most `timeout` for a message.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`], or `Disconnected` as for `recv`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fibra::sync::mpsc::{channel, RecvTimeoutError};
    ///
    /// let (_tx, rx) = channel::<u8>();
    /// let r = rx.recv_timeout(Duration::from_millis(5));
    /// assert_eq!(r, Err(RecvTimeoutError::Timeout));
    /// ```
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        recv_timeout(&self.chan, timeout)
    }

    /// The messages as they come, until every sender is gone.
    ///
    /// ```
    /// let (tx, rx) = fibra::sync::mpsc::channel();
    /// tx.send(1).unwrap();
    /// tx.send(2).unwrap();
    /// drop(tx);
    /// assert_eq!(rx.iter().sum::<i32>(), 3);
    /// ```
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// The messages there now, without waiting.
    ///
    /// ```
    /// let (tx, rx) = fibra::sync::mpsc::channel();
    /// tx.send(1).unwrap();
    /// assert_eq!(rx.try_iter().count(), 1); // and does not wait for more
    /// ```
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { rx: self }
    }
}

/// Waits for each message; see [`Receiver::iter`].
#[derive(Debug)]
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

/// Takes the messages there now; see [`Receiver::try_iter`].
#[derive(Debug)]
pub struct TryIter<'a, T> {
    rx: &'a Receiver<T>,
}

/// Waits for each message, owning the receiver.
#[derive(Debug)]
pub struct IntoIter<T> {
    rx: Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
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
        IntoIter { rx: self }
    }
}

// Not derived: a derive would demand `T: Clone`.
impl<T> Clone for Sender<T> {
    fn clone(&self) -> Sender<T> {
        Sender {
            chan: self.chan.clone(),
        }
    }
}

impl<T> Clone for SyncSender<T> {
    fn clone(&self) -> SyncSender<T> {
        SyncSender {
            chan: self.chan.clone(),
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for SyncSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncSender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

impl<T> chan::SelectRecv<T> for Receiver<T> {
    fn select_receiver(&self) -> &chan::Receiver<T> {
        &self.chan
    }
}

/// `try_recv` with std's error (for `oneshot` too).
pub(super) fn try_recv<T>(chan: &chan::Receiver<T>) -> Result<T, TryRecvError> {
    chan.try_recv().map_err(|e| match e {
        chan::TryRecvError::Empty => TryRecvError::Empty,
        chan::TryRecvError::Disconnected => TryRecvError::Disconnected,
    })
}

/// `recv_timeout` with std's error (for `oneshot` too).
pub(super) fn recv_timeout<T>(
    chan: &chan::Receiver<T>,
    timeout: Duration,
) -> Result<T, RecvTimeoutError> {
    chan.recv_timeout(timeout).map_err(|e| match e {
        chan::RecvTimeoutError::Timeout => RecvTimeoutError::Timeout,
        chan::RecvTimeoutError::Disconnected => RecvTimeoutError::Disconnected,
    })
}
