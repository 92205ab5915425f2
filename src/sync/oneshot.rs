//! A channel for exactly one message: the usual way to get one answer back
//! from another fiber or thread.
//!
//! ```
//! use fibra::sync::oneshot;
//!
//! fibra::run(|| {
//!     let (tx, rx) = oneshot::channel();
//!     fibra::spawn(move || tx.send(6 * 7).unwrap());
//!     assert_eq!(rx.recv().unwrap(), 42);
//! });
//! ```

use std::fmt;
use std::sync::mpsc::TrySendError;
use std::time::Duration;

pub use std::sync::mpsc::{RecvError, RecvTimeoutError, TryRecvError};

use crate::sync::chan::{RecvHalf, SendHalf, halves};

/// A new one-message channel.
///
/// ```
/// let (tx, rx) = fibra::sync::oneshot::channel();
/// tx.send("done").unwrap();
/// assert_eq!(rx.recv().unwrap(), "done");
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = halves(Some(1));
    (Sender { chan: tx }, Receiver { chan: rx })
}

/// Sends the one message; consumed by [`send`](Sender::send).
pub struct Sender<T> {
    chan: SendHalf<T>,
}

/// Receives the one message.
pub struct Receiver<T> {
    chan: RecvHalf<T>,
}

impl<T> Sender<T> {
    /// Sends `value`; never waits.
    ///
    /// # Errors
    ///
    /// Gives the value back if the receiver is gone.
    ///
    /// ```
    /// let (tx, rx) = fibra::sync::oneshot::channel();
    /// drop(rx);
    /// assert_eq!(tx.send(1), Err(1));
    /// ```
    pub fn send(self, value: T) -> Result<(), T> {
        // Room for one, and this is the only send: never `Full`.
        self.chan.send(value, false).map_err(|e| match e {
            TrySendError::Disconnected(v) | TrySendError::Full(v) => v,
        })
    }
}

impl<T> Receiver<T> {
    /// Waits for the value: parks the fiber, or blocks the thread.
    ///
    /// # Errors
    ///
    /// [`RecvError`] if the sender was dropped without sending.
    ///
    /// ```
    /// let (tx, rx) = fibra::sync::oneshot::channel::<u8>();
    /// drop(tx);
    /// assert!(rx.recv().is_err());
    /// ```
    pub fn recv(self) -> Result<T, RecvError> {
        self.chan.recv_blocking()
    }

    /// The value if it has been sent.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if not yet, [`TryRecvError::Disconnected`]
    /// if it never will be.
    ///
    /// ```
    /// use fibra::sync::oneshot::{channel, TryRecvError};
    ///
    /// let (tx, rx) = channel();
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    /// tx.send(3).unwrap();
    /// assert_eq!(rx.try_recv(), Ok(3));
    /// ```
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.chan.try_recv()
    }

    /// Waits at most `timeout` for the value.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`], or `Disconnected` as for `recv`.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (_tx, rx) = fibra::sync::oneshot::channel::<u8>();
    /// assert!(rx.recv_timeout(Duration::from_millis(2)).is_err());
    /// ```
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.chan.recv_timeout(timeout)
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}
