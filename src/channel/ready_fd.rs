//! [`ReadyFd`]: a receiver's readiness as an fd, for a loop of one's own
//! (`poll(2)`, epoll, glib, calloop) that waits on a channel beside its
//! other fds. The channel's side of it is `ready_cell.rs`.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;

use crate::channel::flavors::lockfree::{Array, List};
use crate::channel::flavors::zero::Zero;
use crate::channel::ready_cell::Readiness;
use crate::channel::receiver::{Receiver, ReceiverFlavor};

/// An fd that is readable whenever a [`Receiver`]'s channel has something
/// for [`try_recv`](Receiver::try_recv): a message, a sender waiting to
/// hand one over (`bounded(0)`), or the disconnection. Made by
/// [`Receiver::ready_fd`]; a loop that is not a fiber waits on it with its
/// own `poll(2)` or epoll, then drains the channel with `try_recv` until
/// [`Empty`](super::TryRecvError::Empty).
///
/// It is an eventfd that the channel's senders write when the receive
/// side becomes ready, as they wake a waiting receiver, once per drain (a
/// burst of messages writes it once). The `try_recv` that finds the
/// channel empty clears it and, in the same step, looks at the channel
/// once more, so a message sent between the drain's last `try_recv` and
/// that clear keeps it readable. For a level-triggered watcher (`poll`,
/// `select`, epoll without `EPOLLET`) it is readable exactly while the
/// channel has something to take, give or take a message another receiver
/// took first (one wake-up for nothing, cleared by the `try_recv` that
/// finds the channel empty). An edge-triggered watcher (epoll with
/// `EPOLLET`) gets a new edge for the first message after each drain.
///
/// The fd is the channel's: every `ReadyFd` made from any of its receivers
/// (clones included) is the same fd, and whichever receiver drains the
/// channel clears it. Dropping the last `ReadyFd` of a channel takes its
/// watcher out of the channel, and closes the fd; senders then pay nothing
/// for it. A `ReadyFd` does not keep the channel connected: once every
/// receiver is gone, sends fail as usual.
///
/// Senders may be anywhere: fibers of the loop's own runtime (driven by
/// [`turn`](crate::Runtime::turn) in the same loop), fibers of other
/// runtimes, worker runtimes, plain threads.
///
/// ```
/// use std::os::fd::AsRawFd;
/// use fibra::channel::{TryRecvError, unbounded};
///
/// let (s, r) = unbounded();
/// let ready = r.ready_fd()?;
/// let sender = std::thread::spawn(move || {
///     for i in 0..100 {
///         s.send(i).unwrap();
///     }
/// });
/// let mut got = Vec::new();
/// 'serve: loop {
///     let mut pfd = libc::pollfd { fd: ready.as_raw_fd(), events: libc::POLLIN, revents: 0 };
///     // SAFETY: one valid pollfd.
///     let n = unsafe { libc::poll(&mut pfd, 1, 5000) };
///     assert_eq!(n, 1, "a message was due, yet the fd stayed clear");
///     loop {
///         match r.try_recv() {
///             Ok(i) => got.push(i),
///             Err(TryRecvError::Empty) => break, // the fd is clear again
///             Err(TryRecvError::Disconnected) => break 'serve,
///         }
///     }
/// }
/// sender.join().unwrap();
/// assert_eq!(got, (0..100).collect::<Vec<_>>());
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct ReadyFd<T> {
    readiness: Arc<Readiness>,
    /// Where the readiness is registered; `None` for `never()`, whose fd
    /// is never written.
    channel: Option<Source<T>>,
}

enum Source<T> {
    Zero(Arc<Zero<T>>),
    Array(Arc<Array<T>>),
    List(Arc<List<T>>),
}

impl<T> Receiver<T> {
    /// An fd that is readable whenever this channel has something for
    /// [`try_recv`](Receiver::try_recv): see [`ReadyFd`]. The way for a
    /// loop of one's own (not a fiber) to wait on a channel, beside its
    /// other fds: poll the fd, then `try_recv` until `Empty`.
    ///
    /// Every call on the channel's receivers gives the same fd, kept open
    /// until the last `ReadyFd` is dropped. `never()` gives an fd that is
    /// never readable.
    ///
    /// # Errors
    ///
    /// `Unsupported` for [`after`](super::after), [`at`](super::at) and
    /// [`tick`](super::tick), whose readiness is a time (a timerfd, or the
    /// runtime's fd, which carries its timers, serves there); or the
    /// error of making the eventfd (the open-file limit).
    ///
    /// An outer `poll(2)` loop on both the runtime's fd and a channel its
    /// fibers send on; the loop handles the messages itself, outside any
    /// fiber:
    ///
    /// ```
    /// use std::os::fd::AsRawFd;
    /// use std::time::Duration;
    /// use fibra::channel::{TryRecvError, bounded};
    ///
    /// let rt = fibra::Runtime::new()?;
    /// let (s, events) = bounded::<u32>(4);
    /// for id in 0..3 {
    ///     let s = s.clone();
    ///     rt.spawn(move || {
    ///         fibra::sleep(Duration::from_millis(5 * id as u64));
    ///         s.send(id).unwrap();
    ///     });
    /// }
    /// drop(s);
    /// let ready = events.ready_fd()?;
    /// let mut seen = Vec::new();
    /// 'outer: loop {
    ///     let mut fds = [
    ///         libc::pollfd { fd: rt.as_raw_fd(), events: libc::POLLIN, revents: 0 },
    ///         libc::pollfd { fd: ready.as_raw_fd(), events: libc::POLLIN, revents: 0 },
    ///     ];
    ///     // SAFETY: two valid pollfds.
    ///     assert!(unsafe { libc::poll(fds.as_mut_ptr(), 2, 5000) } > 0);
    ///     if fds[0].revents != 0 {
    ///         rt.turn(Some(Duration::ZERO));
    ///     }
    ///     if fds[1].revents != 0 {
    ///         loop {
    ///             match events.try_recv() {
    ///                 Ok(id) => seen.push(id),
    ///                 Err(TryRecvError::Empty) => break,
    ///                 Err(TryRecvError::Disconnected) => break 'outer,
    ///             }
    ///         }
    ///     }
    /// }
    /// assert_eq!(seen, [0, 1, 2]);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn ready_fd(&self) -> io::Result<ReadyFd<T>> {
        let (readiness, channel) = match &self.flavor {
            ReceiverFlavor::Zero(chan) => (chan.ready.open(&**chan)?, Source::Zero(chan.clone())),
            ReceiverFlavor::Array(ring) => (ring.ready.open(&**ring)?, Source::Array(ring.clone())),
            ReceiverFlavor::List(list) => (list.ready.open(&**list)?, Source::List(list.clone())),
            ReceiverFlavor::Never => {
                return Ok(ReadyFd {
                    readiness: Arc::new(Readiness::new()?),
                    channel: None,
                });
            }
            ReceiverFlavor::At(..) | ReceiverFlavor::Tick(..) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "a timer channel (after, at, tick) has no readiness fd: \
                     its readiness is a time (use a timerfd, or the runtime's fd)",
                ));
            }
        };
        Ok(ReadyFd {
            readiness,
            channel: Some(channel),
        })
    }
}

impl<T> Drop for ReadyFd<T> {
    fn drop(&mut self) {
        match &self.channel {
            Some(Source::Zero(chan)) => chan.ready.close(&**chan),
            Some(Source::Array(ring)) => ring.ready.close(&**ring),
            Some(Source::List(list)) => list.ready.close(&**list),
            None => {}
        }
    }
}

impl<T> AsRawFd for ReadyFd<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.readiness.bell().efd().as_raw_fd()
    }
}

impl<T> AsFd for ReadyFd<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.readiness.bell().efd().as_fd()
    }
}

impl<T> fmt::Debug for ReadyFd<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadyFd")
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}

// Only the channel's own state is reached through a `ReadyFd` (its cell,
// its line), as through a `Receiver`, which is unwind-safe too.
impl<T> std::panic::UnwindSafe for ReadyFd<T> {}
impl<T> std::panic::RefUnwindSafe for ReadyFd<T> {}
