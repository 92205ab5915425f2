//! The one loop every socket goes through: try the syscall; on
//! `WouldBlock`, wait for readiness (parking the fiber, or polling on a
//! plain thread) and try again.
//!
//! A socket is a std socket in non-blocking mode plus a [`Registration`]:
//! a process-unique id (so the reactor can tell this socket from a later
//! one that reuses its fd number) and the read and write timeouts, which
//! std keeps in the kernel (`SO_RCVTIMEO`) but which do nothing on a
//! non-blocking socket.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
#[cfg(feature = "futures-io")]
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "futures-io")]
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::io::Interest;
use crate::net::addr::SockAddrBuf;
use crate::reactor::Registration as Waiting;
use crate::runtime::context;
use crate::runtime::core::Core;
use crate::runtime::park::{Parked, WaitOn, park};
use crate::time::clock;

/// Per-socket state beside the fd.
#[derive(Debug)]
pub(crate) struct Registration {
    /// Unique in the process: the reactor's owner tag for this socket.
    uid: u64,
    /// Nanoseconds; 0 means no timeout.
    read_timeout: AtomicU64,
    write_timeout: AtomicU64,
    /// A task polled the socket on a thread without a runtime: its waker
    /// went to the fallback reactor (`net::fallback`), which must hear of
    /// the socket's end.
    #[cfg(feature = "futures-io")]
    in_fallback: AtomicBool,
}

impl Registration {
    pub(crate) fn new() -> Registration {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Registration {
            uid: NEXT.fetch_add(1, Ordering::Relaxed),
            read_timeout: AtomicU64::new(0),
            write_timeout: AtomicU64::new(0),
            #[cfg(feature = "futures-io")]
            in_fallback: AtomicBool::new(false),
        }
    }

    /// The poll form of the loop, for async tasks (feature `futures-io`):
    /// `op` until it does not fail with `WouldBlock`; then the task's
    /// waker is registered for `interest` (one direction) with the reactor
    /// of the thread's runtime — or, on a thread without one, with the
    /// fallback reactor — and the result is `Pending`.
    ///
    /// `len`: for a stream read or write, the bytes `op` was given; a
    /// short transfer marks the socket drained, as [`Registration::read_stream`]
    /// does, so the next poll registers at once instead of trying a
    /// syscall that would say `WouldBlock`. Socket timeouts do not apply:
    /// an async caller times out with a timer of its own.
    #[cfg(feature = "futures-io")]
    pub(crate) fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        fd: RawFd,
        interest: Interest,
        len: Option<usize>,
        mut op: impl FnMut() -> io::Result<R>,
        transferred: impl Fn(&R) -> usize,
    ) -> Poll<io::Result<R>> {
        let core = context::current();
        let drained = len.is_some()
            && core.is_some_and(|core| {
                // SAFETY: on the runtime's thread; short borrow, no user code.
                let reactor = &unsafe { core.local() }.reactor;
                reactor.is_drained(fd, self.uid, interest)
            });
        if !drained {
            loop {
                match op() {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Ok(r) => {
                        if let (Some(core), Some(len)) = (core, len) {
                            let n = transferred(&r);
                            if n > 0 && n < len {
                                // SAFETY: on the runtime's thread; short
                                // borrow, no user code.
                                unsafe { core.local() }
                                    .reactor
                                    .mark_drained(fd, self.uid, interest);
                            }
                        }
                        return Poll::Ready(Ok(r));
                    }
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        }
        let registered = match core {
            Some(core) => register_task(core, fd, self.uid, interest, cx.waker()),
            None => {
                self.in_fallback.store(true, Ordering::Relaxed);
                crate::net::fallback::register(fd, self.uid, interest, cx.waker().clone());
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
        let timeout = nanos_to_timeout(self.read_timeout.load(Ordering::Relaxed));
        self.io(fd, Interest::READABLE, timeout, op)
    }

    /// Like [`Registration::read`], for writability and the write timeout.
    pub(crate) fn write<R>(&self, fd: RawFd, op: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        let timeout = nanos_to_timeout(self.write_timeout.load(Ordering::Relaxed));
        self.io(fd, Interest::WRITABLE, timeout, op)
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
        self.io_from(context::current(), fd, interest, timeout, op, false)
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
        let timeout = nanos_to_timeout(self.read_timeout.load(Ordering::Relaxed));
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
        let timeout = nanos_to_timeout(self.write_timeout.load(Ordering::Relaxed));
        self.stream_io(fd, Interest::WRITABLE, timeout, len, op)
    }

    fn stream_io(
        &self,
        fd: RawFd,
        interest: Interest,
        timeout: Option<Duration>,
        len: usize,
        op: impl FnMut() -> io::Result<usize>,
    ) -> io::Result<usize> {
        let Some(core) = context::current() else {
            return self.io_from(None, fd, interest, timeout, op, false);
        };
        // SAFETY: on the runtime's thread; short borrows, none across the
        // parks inside `io_from`.
        let drained = unsafe { core.local() }
            .reactor
            .is_drained(fd, self.uid, interest);
        let result = self.io_from(Some(core), fd, interest, timeout, op, drained);
        if let Ok(n) = result
            && n > 0
            && n < len
        {
            // SAFETY: as above.
            unsafe { core.local() }
                .reactor
                .mark_drained(fd, self.uid, interest);
        }
        result
    }

    /// The loop, starting with a wait if the socket is known not ready.
    /// `core`: the runtime entered on this thread (the caller looked).
    fn io_from<R>(
        &self,
        core: Option<&Core>,
        fd: RawFd,
        interest: Interest,
        timeout: Option<Duration>,
        mut op: impl FnMut() -> io::Result<R>,
        mut wait_first: bool,
    ) -> io::Result<R> {
        if let Some(core) = core
            && core.io_budget_spent()
        {
            // Before the call, not after: a cancelled fiber unwinds here
            // without losing what the call would have read or accepted.
            crate::fiber::yield_now();
        }
        let deadline = timeout.map(clock::after_ns);
        loop {
            if !std::mem::take(&mut wait_first) {
                match op() {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    result => return result,
                }
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

    fn wait_in_fiber(
        &self,
        core: &Core,
        fd: RawFd,
        interest: Interest,
        deadline: Option<u64>,
    ) -> io::Result<()> {
        let token = core.current_token();
        let mut stale = Vec::new();
        let waiting = {
            // SAFETY: on the runtime's thread; the borrow ends with this
            // block and runs no user code (the reactor only makes syscalls).
            let reactor = &mut unsafe { core.local() }.reactor;
            reactor
                .socket(fd, self.uid, &mut stale)
                .map(|key| reactor.add_socket_waiter(key, interest, token))
        };
        // No borrow is live: a wake may run a tracing subscriber. The
        // waiters of a stale source are woken even when registering failed.
        for t in stale {
            core.wake(t, crate::runtime::core::Wake::Unparked);
        }
        let waiting = waiting?;
        /// Removes the waiter however the wait ends, unwinding included.
        struct Guard<'a>(&'a Core, Waiting);
        impl Drop for Guard<'_> {
            fn drop(&mut self) {
                // SAFETY: on the runtime's thread; short borrow.
                unsafe { self.0.local() }.reactor.remove_waiter(self.1);
            }
        }
        let _guard = Guard(core, waiting);
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
        #[cfg(feature = "futures-io")]
        if self.in_fallback.load(Ordering::Relaxed) {
            crate::net::fallback::forget(fd, self.uid);
        }
        if let Some(core) = context::current() {
            let mut waiters = Vec::new();
            // SAFETY: on the runtime's thread; the borrow ends in this
            // statement and runs no user code.
            unsafe { core.local() }
                .reactor
                .deregister_socket(fd, self.uid, &mut waiters);
            // No borrow is live: a wake may run a tracing subscriber.
            for t in waiters {
                core.wake(t, crate::runtime::core::Wake::Unparked);
            }
        }
    }

    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.read_timeout
            .store(timeout_to_nanos(timeout)?, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.write_timeout
            .store(timeout_to_nanos(timeout)?, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn read_timeout(&self) -> Option<Duration> {
        nanos_to_timeout(self.read_timeout.load(Ordering::Relaxed))
    }

    pub(crate) fn write_timeout(&self) -> Option<Duration> {
        nanos_to_timeout(self.write_timeout.load(Ordering::Relaxed))
    }

    /// A registration for a duplicate of the fd (`try_clone`): its own id,
    /// the same timeouts.
    pub(crate) fn duplicate(&self) -> Registration {
        let r = Registration::new();
        r.read_timeout
            .store(self.read_timeout.load(Ordering::Relaxed), Ordering::Relaxed);
        r.write_timeout.store(
            self.write_timeout.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        r
    }
}

/// Makes `waker` the task waker of socket `uid` on `fd` for `interest` (one
/// direction) in `core`'s reactor, registering the fd there if it is not
/// yet. Called on `core`'s thread.
///
/// The waker is user code: it is compared (pointers only) inside a borrow,
/// but cloned, and any clone dropped, outside; the reactor drops the waker
/// it replaces after its next poll.
#[cfg(feature = "futures-io")]
pub(crate) fn register_task(
    core: &Core,
    fd: RawFd,
    uid: u64,
    interest: Interest,
    waker: &Waker,
) -> io::Result<()> {
    // SAFETY: on the runtime's thread; short borrow; `will_wake` compares
    // pointers and runs no user code.
    if unsafe { core.local() }
        .reactor
        .task_will_wake(fd, uid, interest, waker)
    {
        return Ok(());
    }
    // User code (a waker's clone), with no borrow live.
    let mut waker = Some(waker.clone());
    let mut stale = Vec::new();
    let registered = {
        // SAFETY: on the runtime's thread; the borrow ends with this block
        // and runs no user code: the waker is moved, not dropped, in here.
        let reactor = &mut unsafe { core.local() }.reactor;
        reactor.socket(fd, uid, &mut stale).map(|key| {
            if let Some(waker) = waker.take() {
                reactor.set_task(key, interest, waker);
            }
        })
    };
    drop(waker); // on error, the clone: user code, no borrow live
    for t in stale {
        core.wake(t, crate::runtime::core::Wake::Unparked);
    }
    registered
}

/// As std: a zero timeout is an error.
fn timeout_to_nanos(timeout: Option<Duration>) -> io::Result<u64> {
    match timeout {
        None => Ok(0),
        Some(d) if d.is_zero() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot set a 0 duration timeout",
        )),
        Some(d) => Ok(clock::duration_ns(d).max(1)),
    }
}

fn nanos_to_timeout(ns: u64) -> Option<Duration> {
    (ns != 0).then(|| Duration::from_nanos(ns))
}

/// A std socket in non-blocking mode and its [`Registration`]: what every
/// fibra socket type wraps. Dropping it deregisters the fd from the current
/// runtime before the std socket closes it.
#[derive(Debug)]
pub(crate) struct Socket<S: AsRawFd> {
    pub(crate) inner: S,
    pub(crate) reg: Registration,
}

impl<S: AsRawFd> Socket<S> {
    /// Wraps a socket that is already non-blocking.
    pub(crate) fn new(inner: S) -> Socket<S> {
        Socket {
            inner,
            reg: Registration::new(),
        }
    }

    /// Runs a reading operation through the loop (read timeout applies).
    pub(crate) fn read<R>(&self, mut op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        self.reg.read(self.inner.as_raw_fd(), || op(&self.inner))
    }

    /// Runs a read of a stream socket into `len` bytes of buffers; see
    /// [`Registration::read_stream`].
    pub(crate) fn read_stream(
        &self,
        len: usize,
        mut op: impl FnMut(&S) -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.reg
            .read_stream(self.inner.as_raw_fd(), len, || op(&self.inner))
    }

    /// Runs a write of `len` bytes to a stream socket; see
    /// [`Registration::write_stream`].
    pub(crate) fn write_stream(
        &self,
        len: usize,
        mut op: impl FnMut(&S) -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.reg
            .write_stream(self.inner.as_raw_fd(), len, || op(&self.inner))
    }

    /// Runs a writing operation through the loop (write timeout applies).
    pub(crate) fn write<R>(&self, mut op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        self.reg.write(self.inner.as_raw_fd(), || op(&self.inner))
    }

    /// The poll form of [`Socket::read`]; see [`Registration::poll_io`].
    #[cfg(feature = "futures-io")]
    pub(crate) fn poll_read<R>(
        &self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let fd = self.inner.as_raw_fd();
        self.reg
            .poll_io(cx, fd, Interest::READABLE, None, || op(&self.inner), |_| 0)
    }

    /// The poll form of [`Socket::read_stream`] (`interest` readable) and
    /// [`Socket::write_stream`] (writable).
    #[cfg(feature = "futures-io")]
    pub(crate) fn poll_stream(
        &self,
        cx: &mut Context<'_>,
        interest: Interest,
        len: usize,
        mut op: impl FnMut(&S) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        let fd = self.inner.as_raw_fd();
        self.reg
            .poll_io(cx, fd, interest, Some(len), || op(&self.inner), |n| *n)
    }

    /// A second handle, given the duplicated std socket.
    pub(crate) fn duplicate(&self, inner: S) -> Socket<S> {
        Socket {
            inner,
            reg: self.reg.duplicate(),
        }
    }

    /// The std socket, deregistered (and still non-blocking).
    pub(crate) fn into_inner(self) -> S {
        let this = std::mem::ManuallyDrop::new(self);
        this.reg.deregister(this.inner.as_raw_fd());
        // SAFETY: `this` is never used or dropped again, so the socket is
        // moved out exactly once.
        unsafe { std::ptr::read(&this.inner) }
    }
}

impl<S: AsRawFd> Drop for Socket<S> {
    fn drop(&mut self) {
        self.reg.deregister(self.inner.as_raw_fd());
    }
}

/// One `accept4` on a listening fd: the new connection comes out
/// non-blocking and close-on-exec, saving the `fcntl` std's accept would
/// need before we could use it. With `peer`, the kernel also writes the
/// peer's address there, saving a `getpeername`.
pub(crate) fn accept_nonblocking(
    listener: RawFd,
    peer: Option<&mut SockAddrBuf>,
) -> io::Result<std::os::fd::OwnedFd> {
    let (addr, len) = match peer {
        Some(buf) => ((&raw mut buf.storage).cast(), &raw mut buf.len),
        None => (std::ptr::null_mut(), std::ptr::null_mut()),
    };
    // SAFETY: accept4 on a listening fd, with either null address pointers
    // or a sockaddr_storage and its length (in: its size; out: the
    // address's); the result is checked.
    let conn = unsafe {
        libc::accept4(
            listener,
            addr,
            len,
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if conn < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `conn` is a new connected socket that nobody else owns.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(conn) })
}

/// `AsRawFd`, `AsFd` and `IntoRawFd` for a fibra socket type whose field
/// `sock` is a [`Socket`].
macro_rules! fd_traits {
    ($($ty:ty),*) => {$(
        impl std::os::fd::AsRawFd for $ty {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                self.sock.inner.as_raw_fd()
            }
        }
        impl std::os::fd::AsFd for $ty {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                self.sock.inner.as_fd()
            }
        }
        impl std::os::fd::IntoRawFd for $ty {
            /// The fd, still in non-blocking mode.
            fn into_raw_fd(self) -> std::os::fd::RawFd {
                self.sock.into_inner().into_raw_fd()
            }
        }
    )*};
}
pub(crate) use fd_traits;

/// `Read` and `Write` for a stream type (field `sock`) and for `&` it, all
/// through the loop. Empty buffers return 0 at once, as on a blocking std
/// socket (a non-blocking `recv` of nothing reports `WouldBlock`). Writes go
/// through std's, which use `send(MSG_NOSIGNAL)` for sockets: a closed peer
/// is `BrokenPipe`, never a SIGPIPE.
/// The bytes one `readv`/`writev` can move for buffers of these lengths:
/// std passes at most `IOV_MAX` (1024 on Linux) of them. Counting more would
/// make a full transfer look short, mark the socket drained, and park the
/// next call for an edge that may never come.
pub(crate) fn vectored_len(lens: impl Iterator<Item = usize>) -> usize {
    lens.take(1024).fold(0usize, usize::saturating_add)
}

macro_rules! stream_io {
    ($($ty:ty),*) => {$(
        impl std::io::Read for &$ty {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if buf.is_empty() {
                    return Ok(0);
                }
                self.sock.read_stream(buf.len(), |mut s| std::io::Read::read(&mut s, buf))
            }
            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                if bufs.iter().all(|b| b.is_empty()) {
                    return Ok(0);
                }
                let len = $crate::net::socket::vectored_len(bufs.iter().map(|b| b.len()));
                self.sock
                    .read_stream(len, |mut s| std::io::Read::read_vectored(&mut s, bufs))
            }
        }
        impl std::io::Write for &$ty {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if buf.is_empty() {
                    return Ok(0);
                }
                self.sock.write_stream(buf.len(), |mut s| std::io::Write::write(&mut s, buf))
            }
            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                let len = $crate::net::socket::vectored_len(bufs.iter().map(|b| b.len()));
                self.sock
                    .write_stream(len, |mut s| std::io::Write::write_vectored(&mut s, bufs))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        impl std::io::Read for $ty {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                std::io::Read::read(&mut &*self, buf)
            }
            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                std::io::Read::read_vectored(&mut &*self, bufs)
            }
        }
        impl std::io::Write for $ty {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                std::io::Write::write(&mut &*self, buf)
            }
            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                std::io::Write::write_vectored(&mut &*self, bufs)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
    )*};
}
pub(crate) use stream_io;

/// The read and write timeouts of a socket type (field `sock`), kept in its
/// [`Registration`] (std keeps them in the kernel, where they do nothing for
/// a non-blocking socket). An expired timeout is `WouldBlock`, as std
/// reports it on Unix; `Some(Duration::ZERO)` is `InvalidInput`, as in std.
macro_rules! timeouts {
    ($($ty:ty),*) => {$(
        impl $ty {
            /// Sets the read timeout (`None`: wait forever). A read waiting
            /// longer fails with `WouldBlock`, as std's does on Unix.
            ///
            /// ```
            /// use std::io::Read;
            /// use std::time::Duration;
            ///
            /// fibra::run(|| {
            ///     let (mut a, _b) = fibra::net::UnixStream::pair().unwrap();
            ///     a.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
            ///     assert_eq!(a.read_timeout().unwrap(), Some(Duration::from_millis(10)));
            ///     let err = a.read(&mut [0; 8]).unwrap_err(); // nothing comes
            ///     assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
            /// });
            /// ```
            ///
            /// # Errors
            ///
            /// `InvalidInput` for `Some(Duration::ZERO)`, as std.
            pub fn set_read_timeout(&self, timeout: Option<std::time::Duration>) -> std::io::Result<()> {
                self.sock.reg.set_read_timeout(timeout)
            }

            /// Sets the write timeout (see `set_read_timeout`).
            ///
            /// # Errors
            ///
            /// `InvalidInput` for `Some(Duration::ZERO)`, as std.
            pub fn set_write_timeout(&self, timeout: Option<std::time::Duration>) -> std::io::Result<()> {
                self.sock.reg.set_write_timeout(timeout)
            }

            /// The read timeout.
            pub fn read_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
                Ok(self.sock.reg.read_timeout())
            }

            /// The write timeout.
            pub fn write_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
                Ok(self.sock.reg.write_timeout())
            }
        }
    )*};
}
pub(crate) use timeouts;
