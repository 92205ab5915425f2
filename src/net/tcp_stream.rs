//! TCP connections: [`TcpStream`], std's stream in non-blocking mode
//! behind the loop of `registration.rs`.

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::time::Duration;

use crate::io::Interest;
use crate::net::macros::{fd_traits, ready_io, stream_io, timeouts};
use crate::net::resolve::{ToSocketAddrs, resolve};
use crate::net::socket::Socket;

/// A TCP connection; like [`std::net::TcpStream`], but reads, writes and
/// connects park the fiber.
///
/// A fiber may read while another writes, through `&TcpStream` or a
/// [`try_clone`](TcpStream::try_clone): each direction waits on its own.
///
/// ```
/// use std::io::{Read, Write};
/// use std::rc::Rc;
/// use fibra::net::{TcpListener, TcpStream};
///
/// fibra::run(|| {
///     let l = TcpListener::bind("127.0.0.1:0").unwrap();
///     let addr = l.local_addr().unwrap();
///     fibra::spawn(move || {
///         let (mut c, _) = l.accept().unwrap();
///         let mut buf = [0; 4];
///         c.read_exact(&mut buf).unwrap();
///         c.write_all(&buf).unwrap();
///     });
///     let stream = Rc::new(TcpStream::connect(addr).unwrap());
///     let s = stream.clone();
///     let reader = fibra::spawn(move || {
///         let mut buf = [0; 4];
///         (&*s).read_exact(&mut buf).unwrap(); // parks until the echo
///         buf
///     });
///     (&*stream).write_all(b"ping").unwrap();
///     assert_eq!(&reader.join().unwrap(), b"ping");
/// });
/// ```
pub struct TcpStream {
    sock: Socket<std::net::TcpStream>,
}

impl TcpStream {
    pub(crate) fn from_nonblocking(inner: std::net::TcpStream) -> TcpStream {
        TcpStream {
            sock: Socket::new(inner),
        }
    }

    /// Connects to `addr`, trying each of its addresses in turn, parking
    /// the fiber while a host name is looked up (on the blocking pool) and
    /// while the handshake is in flight.
    ///
    /// # Errors
    ///
    /// The last address's error (`ConnectionRefused`, ...).
    ///
    /// ```
    /// use fibra::net::{TcpListener, TcpStream};
    ///
    /// fibra::run(|| {
    ///     let l = TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let port = l.local_addr().unwrap().port();
    ///     let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    ///     assert_eq!(s.peer_addr().unwrap().port(), port);
    /// });
    /// ```
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address to connect to");
        for addr in resolve(&addr)? {
            match TcpStream::connect_addr(&addr, None) {
                Ok(stream) => return Ok(stream),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Connects to `addr`, giving up after `timeout` (`TimedOut`).
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a zero timeout, as std; `TimedOut`; the
    /// connection's error.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// fibra::run(|| {
    ///     let l = fibra::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let addr = l.local_addr().unwrap();
    ///     assert!(fibra::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).is_ok());
    /// });
    /// ```
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        if timeout.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot set a 0 duration timeout",
            ));
        }
        TcpStream::connect_addr(addr, Some(timeout))
    }

    fn connect_addr(addr: &SocketAddr, timeout: Option<Duration>) -> io::Result<TcpStream> {
        // mio starts a non-blocking connect; we wait for writability.
        let mio_stream = mio::net::TcpStream::connect(*addr)?;
        // SAFETY: the fd comes straight out of mio, which gives up ownership.
        let inner = unsafe { std::net::TcpStream::from_raw_fd(mio_stream.into_raw_fd()) };
        let stream = TcpStream::from_nonblocking(inner);
        let sock = &stream.sock;
        let result = sock
            .reg
            .io(sock.inner.as_raw_fd(), Interest::WRITABLE, timeout, || {
                if let Some(err) = sock.inner.take_error()? {
                    return Err(err);
                }
                match sock.inner.peer_addr() {
                    Ok(_) => Ok(()),
                    // Still in progress.
                    Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
                        Err(io::ErrorKind::WouldBlock.into())
                    }
                    Err(e) => Err(e),
                }
            });
        match result {
            Ok(()) => Ok(stream),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && timeout.is_some() => Err(
                io::Error::new(io::ErrorKind::TimedOut, "connection timed out"),
            ),
            Err(e) => Err(e),
        }
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.sock.inner.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.inner.local_addr()
    }

    /// Shuts down the read half, the write half or both.
    ///
    /// ```
    /// use std::io::Read;
    /// use std::net::Shutdown;
    ///
    /// fibra::run(|| {
    ///     let l = fibra::net::TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let addr = l.local_addr().unwrap();
    ///     let peer = fibra::spawn(move || l.accept().unwrap().0);
    ///     let c = fibra::net::TcpStream::connect(addr).unwrap();
    ///     let mut server_side = peer.join().unwrap();
    ///     c.shutdown(Shutdown::Write).unwrap();
    ///     let mut buf = Vec::new();
    ///     assert_eq!(server_side.read_to_end(&mut buf).unwrap(), 0); // EOF
    /// });
    /// ```
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.sock.inner.shutdown(how)
    }

    /// A second handle to the same connection, with its own wait state (a
    /// fiber may read through one while another writes through the other).
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        Ok(TcpStream {
            sock: self.sock.duplicate(self.sock.inner.try_clone()?),
        })
    }

    /// Reads without consuming, parking until data (or EOF) is there.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.read(|s| s.peek(buf))
    }

    /// Sets `TCP_NODELAY`.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.sock.inner.set_nodelay(nodelay)
    }

    /// Reads `TCP_NODELAY`.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.sock.inner.nodelay()
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.sock.inner.set_ttl(ttl)
    }

    /// Reads `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.sock.inner.ttl()
    }

    /// Takes the pending socket error (`SO_ERROR`), if any.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.sock.inner.take_error()
    }
}

fd_traits!(TcpStream => std::net::TcpStream);
stream_io!(TcpStream);
ready_io!(TcpStream);
#[cfg(feature = "futures-io")]
crate::net::futures_io::async_io!(TcpStream);
#[cfg(feature = "tokio-io")]
crate::net::tokio_io::tokio_io!(TcpStream);

impl From<std::net::TcpStream> for TcpStream {
    /// Takes over a std stream, keeping the read and write timeouts it
    /// had. Its calls park, as every fibra socket's (the fd is put in
    /// non-blocking mode for fibra's loop, and the socket starts in
    /// waiting mode even if the std one was non-blocking: see
    /// `set_nonblocking`).
    fn from(inner: std::net::TcpStream) -> TcpStream {
        let _ = inner.set_nonblocking(true);
        let (read, write) = (inner.read_timeout(), inner.write_timeout());
        TcpStream {
            sock: Socket::adopt(inner, read, write),
        }
    }
}
timeouts!(TcpStream);
