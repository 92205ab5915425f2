//! A channel for exactly one message: the usual way to get one answer back
//! from another fiber or thread. A face on
//! [`fibra::channel`](crate::channel)'s core (a channel of one place): its
//! [`Receiver`] is a `recv(rx) -> msg` arm of
//! [`fibra::select!`](crate::select) too.
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
use std::time::Duration;

pub use std::sync::mpsc::{RecvError, RecvTimeoutError, TryRecvError};

use crate::channel as chan;
use crate::sync::mpsc::{recv_timeout, try_recv};

/// A new one-message channel.
///
/// ```
/// let (tx, rx) = fibra::sync::oneshot::channel();
/// tx.send("done").unwrap();
/// assert_eq!(rx.recv().unwrap(), "done");
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    // A channel of one place: the one send never waits.
    let (tx, rx) = chan::bounded(1);
    (Sender { chan: tx }, Receiver { chan: rx })
}

/// Sends the one message; consumed by [`send`](Sender::send).
pub struct Sender<T> {
    chan: chan::Sender<T>,
}

/// Receives the one message.
pub struct Receiver<T> {
    chan: chan::Receiver<T>,
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
        self.chan.try_send(value).map_err(|e| e.into_inner())
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
        self.chan.recv().map_err(|_| RecvError)
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
        try_recv(&self.chan)
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
        recv_timeout(&self.chan, timeout)
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

impl<T> chan::SelectRecv<T> for Receiver<T> {
    fn select_receiver(&self) -> &chan::Receiver<T> {
        &self.chan
    }
}
