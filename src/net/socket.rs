//! A std socket in non-blocking mode and its [`Registration`]: what every
//! fibra socket type wraps, and the `accept4` that makes new ones.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
#[cfg(feature = "futures-io")]
use std::task::{Context, Poll};

#[cfg(feature = "futures-io")]
use crate::io::Interest;
use crate::net::addr::SockAddrBuf;
use crate::net::registration::{Registration, StreamBuf};

/// A std socket in non-blocking mode and its [`Registration`]: what every
/// fibra socket type wraps. Dropping it deregisters the fd from the current
/// runtime before the std socket closes it.
///
/// Four words, aligned to 32 bytes, so that it never straddles two cache
/// lines: every read or write loads its id, a timeout and its fd, wherever
/// the user keeps it (a server's connection fiber, typically, at the top of
/// its stack). With a thousand connections each line is cold at every round
/// trip: aligned to 8 bytes only, the socket of `benches/peers`' echo fiber
/// lay across two (`footprint.sh`: 7.8 cold stack lines a trip instead of
/// 8.8).
#[derive(Debug)]
#[repr(align(32))]
pub(crate) struct Socket<S: AsRawFd> {
    pub(crate) inner: S,
    pub(crate) reg: Registration,
    /// A task polled the socket on a thread without a runtime: its waker
    /// went to the fallback reactor (`runtime::fallback`), which must hear
    /// of the socket's end. (Here rather than in the `Registration`: beside
    /// the fd it takes what would be padding, and the socket stays four
    /// words.)
    #[cfg(feature = "futures-io")]
    in_fallback: std::sync::atomic::AtomicBool,
}

const _: () = assert!(size_of::<Socket<std::net::TcpStream>>() == 32);

impl<S: AsRawFd> Socket<S> {
    /// Wraps a socket that is already non-blocking.
    pub(crate) fn new(inner: S) -> Socket<S> {
        Socket {
            inner,
            reg: Registration::new(),
            #[cfg(feature = "futures-io")]
            in_fallback: std::sync::atomic::AtomicBool::new(false),
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

    /// One `recv` or `send` of a stream socket; see
    /// [`Registration::transfer`].
    #[inline]
    pub(crate) fn transfer(&self, buf: StreamBuf<'_>) -> io::Result<usize> {
        self.reg.transfer(self.inner.as_raw_fd(), buf)
    }

    /// `Write::write_all` of a stream socket: [`Socket::transfer`] until
    /// `buf` is sent. std's provided method does the same through `write`,
    /// in a generic loop of its own and one call more: a server's reply
    /// goes through here at every request.
    pub(crate) fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.transfer(StreamBuf::send(buf)) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "failed to write whole buffer",
                    ));
                }
                Ok(n) => buf = &buf[n.min(buf.len())..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
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

    /// Waits until the socket may be ready for `interest`; see
    /// [`Registration::ready`].
    pub(crate) fn ready(&self, interest: crate::io::Interest) -> io::Result<()> {
        self.reg.ready(self.inner.as_raw_fd(), interest)
    }

    /// One try of a stream read or write of `len` bytes; see
    /// [`Registration::try_stream`].
    pub(crate) fn try_stream(
        &self,
        interest: crate::io::Interest,
        len: usize,
        mut op: impl FnMut(&S) -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.reg
            .try_stream(self.inner.as_raw_fd(), interest, len, || op(&self.inner))
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
        self.reg.poll_io(
            cx,
            fd,
            Interest::READABLE,
            None,
            || op(&self.inner),
            |_| 0,
            &self.in_fallback,
        )
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
        self.reg.poll_io(
            cx,
            fd,
            interest,
            Some(len),
            || op(&self.inner),
            |n| *n,
            &self.in_fallback,
        )
    }

    /// A second handle, given the duplicated std socket.
    pub(crate) fn duplicate(&self, inner: S) -> Socket<S> {
        Socket {
            inner,
            reg: self.reg.duplicate(),
            #[cfg(feature = "futures-io")]
            in_fallback: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The std socket, deregistered (and still non-blocking).
    pub(crate) fn into_inner(self) -> S {
        let mut this = std::mem::ManuallyDrop::new(self);
        this.deregister();
        // SAFETY: `this` is never used or dropped again, so the
        // registration is dropped and the socket moved out exactly once.
        unsafe {
            std::ptr::drop_in_place(&raw mut this.reg);
            std::ptr::read(&this.inner)
        }
    }

    /// Wraps a std socket (already non-blocking) keeping the timeouts the
    /// kernel held for it, `read` and `write` as std reads them.
    pub(crate) fn adopt(
        inner: S,
        read: io::Result<Option<std::time::Duration>>,
        write: io::Result<Option<std::time::Duration>>,
    ) -> Socket<S> {
        let sock = Socket::new(inner);
        // (A timeout the kernel holds is never zero, the one error.)
        let _ = sock.reg.timeouts().set_read_timeout(read.ok().flatten());
        let _ = sock.reg.timeouts().set_write_timeout(write.ok().flatten());
        sock
    }

    /// Forgets the fd in the reactors that have it: the fallback's, if a
    /// task registered there, and the current runtime's; before the fd is
    /// closed (see [`Registration::deregister`]).
    fn deregister(&self) {
        let fd = self.inner.as_raw_fd();
        #[cfg(feature = "futures-io")]
        if self.in_fallback.load(std::sync::atomic::Ordering::Relaxed) {
            crate::runtime::fallback::forget(fd, self.reg.uid());
        }
        self.reg.deregister(fd);
    }
}

impl<S: AsRawFd> Drop for Socket<S> {
    fn drop(&mut self) {
        self.deregister();
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
