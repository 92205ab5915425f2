//! The errors of `fibra::channel`: crossbeam-channel's types, with its
//! names, variants and messages, so that code moving over keeps matching
//! on them.

use std::error::Error;
use std::fmt;

/// A send to a channel whose receivers are all gone; it gives the message
/// back.
///
/// ```
/// let (s, r) = fibra::channel::unbounded();
/// drop(r);
/// assert_eq!(s.send(7), Err(fibra::channel::SendError(7)));
/// ```
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

/// Why [`Sender::try_send`](super::Sender::try_send) failed; both keep the
/// message.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// No room (a channel of capacity 0 has room only while a receiver
    /// waits).
    Full(T),
    /// Every receiver is gone.
    Disconnected(T),
}

/// Why [`Sender::send_timeout`](super::Sender::send_timeout) failed; both
/// keep the message.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendTimeoutError<T> {
    /// No room came before the deadline.
    Timeout(T),
    /// Every receiver is gone.
    Disconnected(T),
}

/// A receive from a channel that is empty and whose senders are all gone.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct RecvError;

/// Why [`Receiver::try_recv`](super::Receiver::try_recv) failed.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub enum TryRecvError {
    /// Nothing to take now.
    Empty,
    /// Empty, and every sender is gone.
    Disconnected,
}

/// Why [`Receiver::recv_timeout`](super::Receiver::recv_timeout) failed.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub enum RecvTimeoutError {
    /// Nothing came before the deadline.
    Timeout,
    /// Empty, and every sender is gone.
    Disconnected,
}

/// [`Select::try_select`](super::Select::try_select) found no operation
/// ready.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct TrySelectError;

/// [`Select::select_timeout`](super::Select::select_timeout) found no
/// operation ready before the deadline.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct SelectTimeoutError;

/// [`Select::try_ready`](super::Select::try_ready) found no operation
/// ready.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct TryReadyError;

/// [`Select::ready_timeout`](super::Select::ready_timeout) found no
/// operation ready before the deadline.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct ReadyTimeoutError;

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        "SendError(..)".fmt(f)
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        "sending on a disconnected channel".fmt(f)
    }
}

impl<T: Send> Error for SendError<T> {}

impl<T> SendError<T> {
    /// The message that could not be sent.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(..) => "Full(..)".fmt(f),
            TrySendError::Disconnected(..) => "Disconnected(..)".fmt(f),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(..) => "sending on a full channel".fmt(f),
            TrySendError::Disconnected(..) => "sending on a disconnected channel".fmt(f),
        }
    }
}

impl<T: Send> Error for TrySendError<T> {}

impl<T> From<SendError<T>> for TrySendError<T> {
    fn from(err: SendError<T>) -> TrySendError<T> {
        TrySendError::Disconnected(err.0)
    }
}

impl<T> TrySendError<T> {
    /// The message that could not be sent.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Disconnected(v) => v,
        }
    }

    /// Whether the channel was full.
    pub fn is_full(&self) -> bool {
        matches!(self, TrySendError::Full(_))
    }

    /// Whether the receivers were gone.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, TrySendError::Disconnected(_))
    }
}

impl<T> fmt::Debug for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        "SendTimeoutError(..)".fmt(f)
    }
}

impl<T> fmt::Display for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(..) => "timed out waiting on send operation".fmt(f),
            SendTimeoutError::Disconnected(..) => "sending on a disconnected channel".fmt(f),
        }
    }
}

impl<T: Send> Error for SendTimeoutError<T> {}

impl<T> From<SendError<T>> for SendTimeoutError<T> {
    fn from(err: SendError<T>) -> SendTimeoutError<T> {
        SendTimeoutError::Disconnected(err.0)
    }
}

impl<T> SendTimeoutError<T> {
    /// The message that could not be sent.
    pub fn into_inner(self) -> T {
        match self {
            SendTimeoutError::Timeout(v) | SendTimeoutError::Disconnected(v) => v,
        }
    }

    /// Whether the deadline passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, SendTimeoutError::Timeout(_))
    }

    /// Whether the receivers were gone.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, SendTimeoutError::Disconnected(_))
    }
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        "receiving on an empty and disconnected channel".fmt(f)
    }
}

impl Error for RecvError {}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => "receiving on an empty channel".fmt(f),
            TryRecvError::Disconnected => "receiving on an empty and disconnected channel".fmt(f),
        }
    }
}

impl Error for TryRecvError {}

impl From<RecvError> for TryRecvError {
    fn from(_: RecvError) -> TryRecvError {
        TryRecvError::Disconnected
    }
}

impl TryRecvError {
    /// Whether the channel was empty (with senders left).
    pub fn is_empty(&self) -> bool {
        matches!(self, TryRecvError::Empty)
    }

    /// Whether the channel was empty and its senders gone.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, TryRecvError::Disconnected)
    }
}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => "timed out waiting on receive operation".fmt(f),
            RecvTimeoutError::Disconnected => "channel is empty and disconnected".fmt(f),
        }
    }
}

impl Error for RecvTimeoutError {}

impl From<RecvError> for RecvTimeoutError {
    fn from(_: RecvError) -> RecvTimeoutError {
        RecvTimeoutError::Disconnected
    }
}

impl RecvTimeoutError {
    /// Whether the deadline passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, RecvTimeoutError::Timeout)
    }

    /// Whether the channel was empty and its senders gone.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, RecvTimeoutError::Disconnected)
    }
}

impl fmt::Display for TrySelectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        "all operations in select would block".fmt(f)
    }
}

impl Error for TrySelectError {}

impl fmt::Display for SelectTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        "timed out waiting on select".fmt(f)
    }
}

impl Error for SelectTimeoutError {}

impl fmt::Display for TryReadyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        "all operations in select would block".fmt(f)
    }
}

impl Error for TryReadyError {}

impl fmt::Display for ReadyTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        "timed out waiting on ready".fmt(f)
    }
}

impl Error for ReadyTimeoutError {}
