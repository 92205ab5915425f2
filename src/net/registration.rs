//! The one loop every socket goes through: try the syscall; on
//! `WouldBlock`, wait for readiness (parking the fiber, or polling on a
//! plain thread) and try again.
//!
//! A socket's [`Registration`] is what it keeps beside its fd: a
//! process-unique id (so the reactor can tell this socket from a later
//! one that reuses its fd number) and the read and write timeouts, which
//! std keeps in the kernel (`SO_RCVTIMEO`) but which do nothing on a
//! non-blocking socket. As the kernel's, the timeouts and the
//! non-blocking mode are shared by a socket and its `try_clone`s: they
//! are kept in [`TimeoutWords`], which the first clone moves into a
//! `SharedWords` both point at.

use std::io;
use std::os::fd::RawFd;
#[cfg(feature = "futures-io")]
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(feature = "futures-io")]
use std::task::{Context, Poll};
use std::time::Duration;

use crate::io::Interest;
pub(crate) use crate::net::stream_buf::StreamBuf;
use crate::net::timeout_words::{NONBLOCKING, SHARED, TimeoutWords, shared_value};
use crate::scheduler::context;
use crate::scheduler::core::Core;
use crate::scheduler::park::{Parked, park};
use crate::scheduler::readiness::{self, FdWaiter};
use crate::scheduler::wait_on::WaitOn;
use crate::timer::clock;

/// Per-socket state beside the fd.
#[derive(Debug)]
pub(crate) struct Registration {
    /// Unique in the process: the reactor's owner tag for this socket.
    uid: u64,
    /// The read and write timeouts and the non-blocking mode, shared with
    /// the socket's clones.
    timeouts: TimeoutWords,
}

impl Registration {
    pub(crate) fn new() -> Registration {
        Registration {
            uid: crate::reactor::new_socket_owner(),
            timeouts: TimeoutWords::new(),
        }
    }

    /// A registration for a duplicate of the fd (`try_clone`): its own id,
    /// the timeouts and the mode shared with this one (both ways, as the
    /// kernel shares them between duplicated fds).
    pub(crate) fn duplicate(&self) -> Registration {
        Registration {
            uid: crate::reactor::new_socket_owner(),
            timeouts: self.timeouts.duplicate(),
        }
    }

    /// The socket's timeouts and non-blocking mode, to read and set.
    pub(crate) fn timeouts(&self) -> &TimeoutWords {
        &self.timeouts
    }

    /// The socket's process-unique id.
    #[cfg(feature = "futures-io")]
    pub(crate) fn uid(&self) -> u64 {
        self.uid
    }

    /// The poll form of the loop, for async tasks (feature `futures-io`):
    /// `op` until it does not fail with `WouldBlock`; then the task's
    /// waker is registered for `interest` (one direction) with the reactor
    /// of the thread's runtime — or, on a thread without one, with the
    /// fallback reactor, noted in `in_fallback` (which the socket keeps,
    /// see `Socket`) — and the result is `Pending`.
    ///
    /// `len`: for a stream read or write, the bytes `op` was given; a
    /// short transfer marks the socket drained, as [`Registration::read_stream`]
    /// does, so the next poll registers at once instead of trying a
    /// syscall that would say `WouldBlock`. Socket timeouts do not apply:
    /// an async caller times out with a timer of its own.
    #[cfg(feature = "futures-io")]
    #[expect(
        clippy::too_many_arguments,
        reason = "the two socket polls' one loop: what differs between them is arguments"
    )]
    pub(crate) fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        fd: RawFd,
        interest: Interest,
        len: Option<usize>,
        mut op: impl FnMut() -> io::Result<R>,
        transferred: impl Fn(&R) -> usize,
        in_fallback: &AtomicBool,
    ) -> Poll<io::Result<R>> {
        let core = context::current();
        let drained = len.is_some()
            && core.is_some_and(|core| readiness::is_drained(core, fd, self.uid, interest));
        if !drained {
            loop {
                match op() {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Ok(r) => {
                        if let (Some(core), Some(len)) = (core, len) {
                            let n = transferred(&r);
                            if n > 0 && n < len {
                                readiness::mark_drained(core, fd, self.uid, interest);
                            }
                        }
                        return Poll::Ready(Ok(r));
                    }
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        }
        let registered = match core {
            Some(core) => readiness::register_task(core, fd, self.uid, interest, cx.waker()),
            None => {
                in_fallback.store(true, Ordering::Relaxed);
                crate::runtime::fallback::register(fd, self.uid, interest, cx.waker().clone());
                Ok(())
            }
        };
        match registered {
            // A readiness edge that came after `op` said `WouldBlock` is
            // not lost: events are read only by this thread's next poll,
            // and the waker is in place before it (the fallback's
            // registration is an `EPOLL_CTL_ADD`/`MOD`, which reports the
            // readiness of the moment).
            Ok(()) => Poll::Pending,
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    /// Runs `op` until it does not fail with `WouldBlock`, waiting for
    /// readability in between, at most the read timeout (then `WouldBlock`,
    /// as std reports an expired socket timeout on Unix).
    pub(crate) fn read<R>(&self, fd: RawFd, op: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        let timeout = self.timeouts.load(true);
        self.io_from(
            context::current(),
            fd,
            Interest::READABLE,
            timeout,
            op,
            false,
        )
    }

    /// Like [`Registration::read`], for writability and the write timeout.
    pub(crate) fn write<R>(&self, fd: RawFd, op: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        let timeout = self.timeouts.load(false);
        self.io_from(
            context::current(),
            fd,
            Interest::WRITABLE,
            timeout,
            op,
            false,
        )
    }

    /// The loop: `op` until it does not fail with `WouldBlock`, waiting for
    /// `interest` between tries, at most `timeout` in all.
    pub(crate) fn io<R>(
        &self,
        fd: RawFd,
        interest: Interest,
        timeout: Option<Duration>,
        op: impl FnMut() -> io::Result<R>,
    ) -> io::Result<R> {
        let timeout = timeout.map_or(0, |d| clock::duration_ns(d).max(1));
        self.io_from(context::current(), fd, interest, timeout, op, false)
    }

    /// One `recv` or `send(MSG_NOSIGNAL)` of a single buffer on a stream
    /// socket, through the loop of [`Registration::read_stream`] and
    /// [`Registration::write_stream`] (their timeouts, their draining).
    ///
    /// Both directions are this one function, not inlined into its callers:
    /// a connection's round trip is a read and a write, and with one copy
    /// of the loop instead of two (each instantiated for its own `op`) it
    /// runs through half the code, which after every wait comes back from
    /// the kernel cold.
    #[inline(never)]
    pub(crate) fn transfer(&self, fd: RawFd, mut buf: StreamBuf<'_>) -> io::Result<usize> {
        let (interest, read) = if buf.is_send() {
            (Interest::WRITABLE, false)
        } else {
            (Interest::READABLE, true)
        };
        let timeout = self.timeouts.load(read);
        let len = buf.len();
        self.stream_io(fd, interest, timeout, len, || buf.call(fd))
    }

    /// Like [`Registration::read`] for a stream socket, with `op` reading
    /// into buffers of `len` bytes in all. A short read shows the receive
    /// buffer empty: the next read waits for an event first (see the
    /// reactor's `mark_drained`).
    pub(crate) fn read_stream(
        &self,
        fd: RawFd,
        len: usize,
        op: impl FnMut() -> io::Result<usize>,
    ) -> io::Result<usize> {
        let timeout = self.timeouts.load(true);
        self.stream_io(fd, Interest::READABLE, timeout, len, op)
    }

    /// Like [`Registration::read_stream`], for writes: a short write shows
    /// the send buffer full.
    pub(crate) fn write_stream(
        &self,
        fd: RawFd,
        len: usize,
        op: impl FnMut() -> io::Result<usize>,
    ) -> io::Result<usize> {
        let timeout = self.timeouts.load(false);
        self.stream_io(fd, Interest::WRITABLE, timeout, len, op)
    }

    #[inline(always)]
    fn stream_io(
        &self,
        fd: RawFd,
        interest: Interest,
        timeout: u64,
        len: usize,
        op: impl FnMut() -> io::Result<usize>,
    ) -> io::Result<usize> {
        let Some(core) = context::current() else {
            return self.io_on_thread(fd, interest, timeout, op);
        };
        let drained = readiness::is_drained(core, fd, self.uid, interest);
        let result = self.io_from(Some(core), fd, interest, timeout, op, drained);
        self.note_short(core, fd, interest, len, &result);
        result
    }

    /// [`Registration::io_from`] on a thread without a runtime, out of line:
    /// its loop and its poll(2) kept out of the fiber's code and frame.
    #[cold]
    #[inline(never)]
    fn io_on_thread(
        &self,
        fd: RawFd,
        interest: Interest,
        timeout: u64,
        op: impl FnMut() -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.io_from(None, fd, interest, timeout, op, false)
    }

    /// A short stream transfer (some bytes, fewer than `len`) shows the
    /// socket's buffer empty (reads) or full (writes): marked drained, so
    /// that the next call waits for an event first.
    fn note_short(
        &self,
        core: &Core,
        fd: RawFd,
        interest: Interest,
        len: usize,
        result: &io::Result<usize>,
    ) {
        if let Ok(n) = *result
            && n > 0
            && n < len
        {
            readiness::mark_drained(core, fd, self.uid, interest);
        }
    }

    /// Waits until the socket may be ready for `interest` (one direction),
    /// within its timeout for that direction (then `WouldBlock`, as a read
    /// reports it). In a fiber it returns at once unless a call on the
    /// socket showed it not ready ([`Registration::try_stream`] after
    /// `WouldBlock`, a short read or write) with no event since; so it may
    /// return when the next call still says `WouldBlock`, which marks the
    /// socket for the wait after. On a thread without a runtime it polls.
    pub(crate) fn ready(&self, fd: RawFd, interest: Interest) -> io::Result<()> {
        let timeout = self.timeouts.load(interest.is_readable());
        let core = context::current();
        let wait = match core {
            Some(core) => readiness::is_drained(core, fd, self.uid, interest),
            None => true,
        };
        // Through the loop even when it returns at once: a fiber that
        // finds its socket ready every time still yields when its I/O
        // budget is spent, as one that reads does.
        self.io_from(core, fd, interest, timeout, || Ok(()), wait)
    }

    /// One try of a stream read or write of `len` bytes, never waiting: its
    /// result, `WouldBlock` included. What it shows is noted for
    /// [`Registration::ready`]: after `WouldBlock` or a short transfer the
    /// socket is registered with the runtime (on first use) and marked not
    /// ready for `interest` until an event says otherwise.
    pub(crate) fn try_stream(
        &self,
        fd: RawFd,
        interest: Interest,
        len: usize,
        mut op: impl FnMut() -> io::Result<usize>,
    ) -> io::Result<usize> {
        let result = loop {
            match op() {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                result => break result,
            }
        };
        let Some(core) = context::current() else {
            return result;
        };
        if matches!(&result, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            // Registered now if it was not: the next `ready` must have an
            // event to wait for (an `EPOLL_CTL_ADD` reports the readiness of
            // its moment, so none is lost in between).
            readiness::mark_would_block(core, fd, self.uid, interest)?;
        }
        self.note_short(core, fd, interest, len, &result);
        result
    }

    /// The loop, starting with a wait if the socket is known not ready.
    /// `core`: the runtime entered on this thread (the caller looked);
    /// `timeout`: nanoseconds in all, 0 for none.
    ///
    /// Inlined, as are `stream_io` and `wait_in_fiber`: a socket call that
    /// waits is one frame from `read_stream` or `write_stream` to the park
    /// instead of three. Every wait returns through these frames with the
    /// caches cold (the kernel ran in between): each frame's prologue and
    /// epilogue are code lines to fetch again, and its saved registers
    /// stack lines (at one connection, `footprint.sh`: 1 331 instructions a
    /// trip instead of 1 436, 61 data lines instead of 65).
    #[inline(always)]
    fn io_from<R>(
        &self,
        core: Option<&Core>,
        fd: RawFd,
        interest: Interest,
        timeout: u64,
        mut op: impl FnMut() -> io::Result<R>,
        mut wait_first: bool,
    ) -> io::Result<R> {
        // The budget is for calls that do not park: one that starts with a
        // wait (its socket known not ready) gives the CPU up anyway, and is
        // not counted.
        if !wait_first
            && let Some(core) = core
            && core.io_budget_spent()
        {
            // Before the call, not after: a cancelled fiber unwinds here
            // without losing what the call would have read or accepted.
            yield_spent_budget();
        }
        // (The timeout as the registration keeps it, in nanoseconds, 0 for
        // none: turned into a `Duration` and back, it was a division and a
        // multiplication on the path of every call.)
        let mut timeout = timeout;
        let deadline = if timeout == 0 {
            None
        } else {
            if timeout & SHARED != 0 {
                timeout = shared_value(timeout);
            }
            (timeout != 0).then(|| clock::now_ns().saturating_add(timeout))
        };
        loop {
            if !std::mem::take(&mut wait_first) {
                match op() {
                    // A socket the user made non-blocking: as std's.
                    Err(e)
                        if e.kind() == io::ErrorKind::WouldBlock && timeout & NONBLOCKING != 0 =>
                    {
                        return Err(e);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    result => return result,
                }
            } else if timeout & NONBLOCKING != 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let waited = match core {
                Some(core) => self.wait_in_fiber(core, fd, interest, deadline),
                None => crate::io::wait_on_thread(fd, interest, deadline).map(drop),
            };
            match waited {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        "the socket's timeout expired",
                    ));
                }
                Err(e) => return Err(e),
            }
        }
    }

    #[inline(always)]
    fn wait_in_fiber(
        &self,
        core: &Core,
        fd: RawFd,
        interest: Interest,
        deadline: Option<u64>,
    ) -> io::Result<()> {
        // Removed when it drops, however the wait ends, unwinding included.
        let _waiter = FdWaiter::socket(core, fd, self.uid, interest)?;
        match park(core, deadline, WaitOn::Fd(fd, interest)) {
            Parked::TimedOut => Err(io::ErrorKind::TimedOut.into()),
            Parked::Woken => Ok(()),
        }
    }

    /// Forgets this socket's registration in the current runtime, if any;
    /// called before the fd is closed. Elsewhere, closing the fd removes it
    /// from the kernel's epoll sets, and a runtime that still has a source
    /// for the number retires it when a new socket uses the number.
    pub(crate) fn deregister(&self, fd: RawFd) {
        if let Some(core) = context::current() {
            readiness::deregister_socket(core, fd, self.uid);
        }
    }
}

/// The yield of a fiber whose I/O budget is spent, out of line: it comes
/// once in 128 calls (the runtime's I/O budget), and inlined (as
/// `fibra::yield_now` is) it would put a second switch, and its cache
/// lines, into every socket call beside the one its park makes.
#[cold]
#[inline(never)]
fn yield_spent_budget() {
    crate::fiber::yield_now();
}
