//! TCP servers: [`TcpListener`], std's listener in non-blocking mode behind
//! the loop of `registration.rs`, and its [`Incoming`] iterator.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd};

use crate::net::TcpStream;
use crate::net::addr::{SockAddrBuf, to_sockaddr};
use crate::net::macros::fd_traits;
use crate::net::resolve::{ToSocketAddrs, resolve};
use crate::net::socket::{Socket, accept_nonblocking};

/// A TCP socket server, listening for connections; like
/// [`std::net::TcpListener`], but `accept` parks the fiber.
///
/// ```
/// use fibra::net::{TcpListener, TcpStream};
///
/// fibra::run(|| {
///     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
///     let addr = listener.local_addr().unwrap();
///     let client = fibra::spawn(move || TcpStream::connect(addr).unwrap());
///     let (_conn, peer) = listener.accept().unwrap();
///     assert_eq!(peer, client.join().unwrap().local_addr().unwrap());
/// });
/// ```
pub struct TcpListener {
    sock: Socket<std::net::TcpListener>,
}

impl TcpListener {
    /// Binds a listener to `addr` (the first of its addresses that works).
    ///
    /// # Errors
    ///
    /// As [`std::net::TcpListener::bind`].
    ///
    /// ```
    /// let listener = fibra::net::TcpListener::bind("127.0.0.1:0")?;
    /// assert!(listener.local_addr()?.port() != 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address to bind to");
        for addr in resolve(&addr)? {
            match bind_listener(&addr, false) {
                Ok(listener) => return TcpListener::from_std(listener),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Binds a listener with `SO_REUSEPORT`, so several listeners (one per
    /// worker thread) can share the port and the kernel spreads the
    /// incoming connections over them.
    ///
    /// # Errors
    ///
    /// When no address of `addr` can be bound.
    ///
    /// ```
    /// use fibra::net::TcpListener;
    ///
    /// let a = TcpListener::bind_reuse_port("127.0.0.1:0")?;
    /// let b = TcpListener::bind_reuse_port(a.local_addr()?)?; // same port
    /// assert_eq!(a.local_addr()?, b.local_addr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind_reuse_port(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address to bind to");
        for addr in resolve(&addr)? {
            match bind_listener(&addr, true) {
                Ok(listener) => return TcpListener::from_std(listener),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn from_std(inner: std::net::TcpListener) -> io::Result<TcpListener> {
        inner.set_nonblocking(true)?;
        Ok(TcpListener {
            sock: Socket::new(inner),
        })
    }

    /// Accepts a connection, parking the fiber until one comes.
    ///
    /// # Errors
    ///
    /// The kernel's, returned as they come: `EMFILE`/`ENFILE` (out of file
    /// descriptors), `ECONNABORTED`, ... The listener stays usable; a server
    /// should back off briefly on `EMFILE` rather than retry at once.
    ///
    /// ```
    /// use fibra::net::{TcpListener, TcpStream};
    ///
    /// fibra::run(|| {
    ///     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let addr = listener.local_addr().unwrap();
    ///     fibra::spawn(move || TcpStream::connect(addr).map(drop));
    ///     let (stream, _) = listener.accept().unwrap();
    ///     assert_eq!(stream.peer_addr().unwrap().ip(), addr.ip());
    /// });
    /// ```
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        // The peer's address comes with the connection: no getpeername.
        let mut peer = SockAddrBuf::new();
        let stream = std::net::TcpStream::from(
            self.sock
                .read(|listener| accept_nonblocking(listener.as_raw_fd(), Some(&mut peer)))?,
        );
        let peer = peer.to_socket_addr()?;
        Ok((TcpStream::from_nonblocking(stream), peer))
    }

    /// Accepts a connection if one is waiting; else registers the task's
    /// waker with the reactor (see [`net`](crate::net#async-io)) and
    /// returns `Pending`. For async accept loops; feature `futures-io`.
    ///
    /// # Errors
    ///
    /// As [`accept`](TcpListener::accept)'s.
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use fibra::net::{TcpListener, TcpStream};
    ///
    /// fibra::run(|| {
    ///     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let addr = listener.local_addr().unwrap();
    ///     fibra::spawn(move || TcpStream::connect(addr).map(drop));
    ///     let (stream, _) = fibra::block_on_future(poll_fn(|cx| listener.poll_accept(cx))).unwrap();
    ///     assert_eq!(stream.peer_addr().unwrap().ip(), addr.ip());
    /// });
    /// ```
    #[cfg(feature = "futures-io")]
    pub fn poll_accept(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<(TcpStream, SocketAddr)>> {
        let mut peer = SockAddrBuf::new();
        let accepted = self.sock.poll_read(cx, |listener| {
            accept_nonblocking(listener.as_raw_fd(), Some(&mut peer))
        });
        accepted.map(|conn| {
            let stream = std::net::TcpStream::from(conn?);
            let peer = peer.to_socket_addr()?;
            Ok((TcpStream::from_nonblocking(stream), peer))
        })
    }

    /// An iterator over incoming connections; each `next` calls
    /// [`accept`](TcpListener::accept). It never returns `None`.
    ///
    /// ```no_run
    /// use std::io::Write;
    ///
    /// fibra::run(|| {
    ///     let listener = fibra::net::TcpListener::bind("127.0.0.1:8080").unwrap();
    ///     for stream in listener.incoming() {
    ///         let mut stream = stream.unwrap();
    ///         fibra::spawn(move || stream.write_all(b"hello\n"));
    ///     }
    /// });
    /// ```
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// The address the listener is bound to.
    ///
    /// ```
    /// let l = fibra::net::TcpListener::bind("127.0.0.1:0")?;
    /// assert!(l.local_addr()?.ip().is_loopback());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.inner.local_addr()
    }

    /// A second handle to the same listening socket.
    ///
    /// ```
    /// let l = fibra::net::TcpListener::bind("127.0.0.1:0")?;
    /// assert_eq!(l.try_clone()?.local_addr()?, l.local_addr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_clone(&self) -> io::Result<TcpListener> {
        Ok(TcpListener {
            sock: self.sock.duplicate(self.sock.inner.try_clone()?),
        })
    }

    /// Sets `IP_TTL`.
    ///
    /// ```
    /// let l = fibra::net::TcpListener::bind("127.0.0.1:0")?;
    /// l.set_ttl(42)?;
    /// assert_eq!(l.ttl()?, 42);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.sock.inner.set_ttl(ttl)
    }

    /// Reads `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.sock.inner.ttl()
    }

    /// Sets `IPV6_V6ONLY`, as std's (deprecated) method of this name: the
    /// kernel reads the option only when the socket is bound, so on a
    /// listener it changes nothing. Set it before binding (socket2's
    /// `Socket::set_only_v6`, then `TcpListener::from(OwnedFd)`).
    ///
    /// # Errors
    ///
    /// The kernel's: `ENOPROTOOPT` on an IPv4 listener, `EINVAL` once bound.
    #[deprecated(note = "this option can only be set before the socket is bound")]
    pub fn set_only_v6(&self, only_v6: bool) -> io::Result<()> {
        #[expect(deprecated, reason = "std's method of the same name and meaning")]
        self.sock.inner.set_only_v6(only_v6)
    }

    /// Reads `IPV6_V6ONLY`, as std's (deprecated) method of this name.
    ///
    /// ```
    /// # #![allow(deprecated)]
    /// fibra::run(|| {
    ///     if let Ok(l) = fibra::net::TcpListener::bind("[::1]:0") {
    ///         let _dual_stack = !l.only_v6().unwrap(); // the system's default
    ///     }
    /// });
    /// ```
    ///
    /// # Errors
    ///
    /// The kernel's: `ENOPROTOOPT` on an IPv4 listener.
    #[deprecated(note = "this option can only be set before the socket is bound")]
    pub fn only_v6(&self) -> io::Result<bool> {
        #[expect(deprecated, reason = "std's method of the same name and meaning")]
        self.sock.inner.only_v6()
    }

    /// Takes the pending socket error (`SO_ERROR`), if any.
    ///
    /// ```
    /// let l = fibra::net::TcpListener::bind("127.0.0.1:0")?;
    /// assert!(l.take_error()?.is_none());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.sock.inner.take_error()
    }
}

/// Binds with `SO_REUSEADDR` (and `SO_REUSEPORT` if asked), then listens
/// with the kernel's largest backlog: std's 128 overflows when hundreds of
/// clients connect at once, and a full accept queue drops handshakes.
fn bind_listener(addr: &SocketAddr, reuse_port: bool) -> io::Result<std::net::TcpListener> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: a new socket, owned by the OwnedFd right after the check.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is ours alone.
    let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    let (sockaddr, len) = to_sockaddr(addr);
    // SAFETY: valid option values and a sockaddr of the given length.
    unsafe {
        let options: &[libc::c_int] = if reuse_port {
            &[libc::SO_REUSEADDR, libc::SO_REUSEPORT]
        } else {
            &[libc::SO_REUSEADDR]
        };
        for &option in options {
            if libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                option,
                (&raw const one).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        if libc::bind(fd, (&raw const sockaddr).cast(), len) != 0
            || libc::listen(fd, libc::SOMAXCONN) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(std::net::TcpListener::from(owned))
}

impl From<std::net::TcpListener> for TcpListener {
    /// Takes over a std listener (and puts it in non-blocking mode).
    fn from(inner: std::net::TcpListener) -> TcpListener {
        let _ = inner.set_nonblocking(true);
        TcpListener {
            sock: Socket::new(inner),
        }
    }
}

fd_traits!(TcpListener => std::net::TcpListener);

/// The iterator of [`TcpListener::incoming`].
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Iterator for Incoming<'_> {
    type Item = io::Result<TcpStream>;
    fn next(&mut self) -> Option<io::Result<TcpStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}
