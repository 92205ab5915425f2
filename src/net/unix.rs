//! Unix-domain sockets: [`UnixListener`], [`UnixStream`], [`UnixDatagram`],
//! std's types in non-blocking mode behind the loop of `registration.rs`.

use std::io;
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::os::unix::net::SocketAddr;
use std::path::Path;

use crate::net::macros::{fd_traits, ready_io, stream_io, timeouts};
use crate::net::socket::{Socket, accept_nonblocking};

/// A Unix-domain socket server; like [`std::os::unix::net::UnixListener`],
/// but `accept` parks the fiber.
///
/// ```
/// use std::io::{Read, Write};
/// use fibra::net::{UnixListener, UnixStream};
///
/// let dir = std::env::temp_dir().join(format!("fibra-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("sock");
/// let _ = std::fs::remove_file(&path);
/// fibra::run(|| {
///     let listener = UnixListener::bind(&path).unwrap();
///     let p = path.clone();
///     fibra::spawn(move || UnixStream::connect(p).unwrap().write_all(b"hi").unwrap());
///     let (mut conn, _) = listener.accept().unwrap();
///     let mut buf = [0; 2];
///     conn.read_exact(&mut buf).unwrap();
///     assert_eq!(&buf, b"hi");
/// });
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub struct UnixListener {
    sock: Socket<std::os::unix::net::UnixListener>,
}

impl UnixListener {
    /// Binds a listener to the path `path`.
    ///
    /// # Errors
    ///
    /// As std's (`AddrInUse` if the path exists).
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        let inner = std::os::unix::net::UnixListener::bind(path)?;
        inner.set_nonblocking(true)?;
        Ok(UnixListener {
            sock: Socket::new(inner),
        })
    }

    /// Binds a listener to `addr` — a path, or (Linux) an abstract name —
    /// as std's `bind_addr`.
    ///
    /// ```
    /// use std::os::linux::net::SocketAddrExt;
    /// use std::os::unix::net::SocketAddr;
    ///
    /// let name = format!("fibra-doc-{}", std::process::id());
    /// let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    /// let listener = fibra::net::UnixListener::bind_addr(&addr).unwrap();
    /// let _client = fibra::net::UnixStream::connect_addr(&addr).unwrap();
    /// assert!(listener.accept().is_ok());
    /// ```
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixListener> {
        let inner = std::os::unix::net::UnixListener::bind_addr(addr)?;
        inner.set_nonblocking(true)?;
        Ok(UnixListener {
            sock: Socket::new(inner),
        })
    }

    /// Accepts a connection, parking the fiber until one comes.
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let stream = std::os::unix::net::UnixStream::from(
            self.sock
                .read(|listener| accept_nonblocking(listener.as_raw_fd(), None))?,
        );
        let peer = stream.peer_addr()?;
        Ok((
            UnixStream {
                sock: Socket::new(stream),
            },
            peer,
        ))
    }

    /// Accepts a connection if one is waiting; else registers the task's
    /// waker with the reactor and returns `Pending`, as
    /// [`TcpListener::poll_accept`](crate::net::TcpListener::poll_accept).
    /// Feature `futures-io`.
    ///
    /// # Errors
    ///
    /// As [`accept`](UnixListener::accept)'s.
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use fibra::net::{UnixListener, UnixStream};
    ///
    /// let path = std::env::temp_dir().join(format!("fibra-poll-accept-{}", std::process::id()));
    /// fibra::run(|| {
    ///     let listener = UnixListener::bind(&path).unwrap();
    ///     let p = path.clone();
    ///     fibra::spawn(move || UnixStream::connect(p).map(drop));
    ///     let accepted = fibra::block_on_future(poll_fn(|cx| listener.poll_accept(cx)));
    ///     assert!(accepted.is_ok());
    /// });
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    #[cfg(feature = "futures-io")]
    pub fn poll_accept(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<(UnixStream, SocketAddr)>> {
        let accepted = self.sock.poll_read(cx, |listener| {
            accept_nonblocking(listener.as_raw_fd(), None)
        });
        accepted.map(|conn| {
            let stream = std::os::unix::net::UnixStream::from(conn?);
            let peer = stream.peer_addr()?;
            Ok((
                UnixStream {
                    sock: Socket::new(stream),
                },
                peer,
            ))
        })
    }

    /// An iterator over incoming connections; it never returns `None`.
    pub fn incoming(&self) -> UnixIncoming<'_> {
        UnixIncoming { listener: self }
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.inner.local_addr()
    }

    /// A second handle to the same listening socket.
    pub fn try_clone(&self) -> io::Result<UnixListener> {
        Ok(UnixListener {
            sock: self.sock.duplicate(self.sock.inner.try_clone()?),
        })
    }

    /// Takes the pending socket error (`SO_ERROR`), if any.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.sock.inner.take_error()
    }
}

impl From<std::os::unix::net::UnixListener> for UnixListener {
    /// Takes over a std listener (and puts it in non-blocking mode).
    fn from(inner: std::os::unix::net::UnixListener) -> UnixListener {
        let _ = inner.set_nonblocking(true);
        UnixListener {
            sock: Socket::new(inner),
        }
    }
}

/// The iterator of [`UnixListener::incoming`].
#[derive(Debug)]
pub struct UnixIncoming<'a> {
    listener: &'a UnixListener,
}

impl Iterator for UnixIncoming<'_> {
    type Item = io::Result<UnixStream>;
    fn next(&mut self) -> Option<io::Result<UnixStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

/// A Unix-domain stream; like [`std::os::unix::net::UnixStream`], but reads
/// and writes park the fiber.
///
/// ```
/// use std::io::{Read, Write};
///
/// fibra::run(|| {
///     let (mut a, mut b) = fibra::net::UnixStream::pair().unwrap();
///     let reader = fibra::spawn(move || {
///         let mut buf = [0; 4];
///         b.read_exact(&mut buf).unwrap(); // parks until written
///         buf
///     });
///     a.write_all(b"pair").unwrap();
///     assert_eq!(&reader.join().unwrap(), b"pair");
/// });
/// ```
pub struct UnixStream {
    sock: Socket<std::os::unix::net::UnixStream>,
}

impl UnixStream {
    /// Connects to the socket at `path`. (A Unix-domain connect completes
    /// or fails at once; it never waits for a handshake.)
    pub fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        let inner = std::os::unix::net::UnixStream::connect(path)?;
        inner.set_nonblocking(true)?;
        Ok(UnixStream {
            sock: Socket::new(inner),
        })
    }

    /// Connects to the listener at `addr` — a path, or (Linux) an abstract
    /// name — as std's `connect_addr` (see [`UnixListener::bind_addr`]).
    pub fn connect_addr(addr: &SocketAddr) -> io::Result<UnixStream> {
        let inner = std::os::unix::net::UnixStream::connect_addr(addr)?;
        inner.set_nonblocking(true)?;
        Ok(UnixStream {
            sock: Socket::new(inner),
        })
    }

    /// A connected pair of streams.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = std::os::unix::net::UnixStream::pair()?;
        a.set_nonblocking(true)?;
        b.set_nonblocking(true)?;
        Ok((
            UnixStream {
                sock: Socket::new(a),
            },
            UnixStream {
                sock: Socket::new(b),
            },
        ))
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.sock.inner.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.inner.local_addr()
    }

    /// Shuts down the read half, the write half or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.sock.inner.shutdown(how)
    }

    /// A second handle to the same stream, with its own wait state.
    pub fn try_clone(&self) -> io::Result<UnixStream> {
        Ok(UnixStream {
            sock: self.sock.duplicate(self.sock.inner.try_clone()?),
        })
    }

    /// Takes the pending socket error (`SO_ERROR`), if any.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.sock.inner.take_error()
    }
}

stream_io!(UnixStream);
ready_io!(UnixStream);
#[cfg(feature = "futures-io")]
crate::net::futures_io::async_io!(UnixStream);
#[cfg(feature = "tokio-io")]
crate::net::tokio_io::tokio_io!(UnixStream);

impl From<std::os::unix::net::UnixStream> for UnixStream {
    /// Takes over a std stream, keeping the read and write timeouts it
    /// had. Its calls park, as every fibra socket's (the fd is put in
    /// non-blocking mode for fibra's loop, and the socket starts in
    /// waiting mode even if the std one was non-blocking: see
    /// `set_nonblocking`).
    fn from(inner: std::os::unix::net::UnixStream) -> UnixStream {
        let _ = inner.set_nonblocking(true);
        let (read, write) = (inner.read_timeout(), inner.write_timeout());
        UnixStream {
            sock: Socket::adopt(inner, read, write),
        }
    }
}

/// A Unix-domain datagram socket; like
/// [`std::os::unix::net::UnixDatagram`], but sends and receives park the
/// fiber.
///
/// ```
/// fibra::run(|| {
///     let (a, b) = fibra::net::UnixDatagram::pair().unwrap();
///     let r = fibra::spawn(move || {
///         let mut buf = [0; 8];
///         let n = b.recv(&mut buf).unwrap();
///         buf[..n].to_vec()
///     });
///     a.send(b"dgram").unwrap();
///     assert_eq!(r.join().unwrap(), b"dgram");
/// });
/// ```
pub struct UnixDatagram {
    sock: Socket<std::os::unix::net::UnixDatagram>,
}

impl UnixDatagram {
    fn wrap(inner: std::os::unix::net::UnixDatagram) -> io::Result<UnixDatagram> {
        inner.set_nonblocking(true)?;
        Ok(UnixDatagram {
            sock: Socket::new(inner),
        })
    }

    /// A socket bound to the path `path`.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixDatagram> {
        UnixDatagram::wrap(std::os::unix::net::UnixDatagram::bind(path)?)
    }

    /// A socket bound to `addr` — a path, or (Linux) an abstract name — as
    /// std's `bind_addr`.
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixDatagram> {
        UnixDatagram::wrap(std::os::unix::net::UnixDatagram::bind_addr(addr)?)
    }

    /// A socket bound to no address.
    pub fn unbound() -> io::Result<UnixDatagram> {
        UnixDatagram::wrap(std::os::unix::net::UnixDatagram::unbound()?)
    }

    /// A connected pair of sockets.
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = std::os::unix::net::UnixDatagram::pair()?;
        Ok((UnixDatagram::wrap(a)?, UnixDatagram::wrap(b)?))
    }

    /// Sets the default peer.
    pub fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.sock.inner.connect(path)
    }

    /// Connects the socket to `addr` (a path or an abstract name), as
    /// std's `connect_addr`.
    pub fn connect_addr(&self, addr: &SocketAddr) -> io::Result<()> {
        self.sock.inner.connect_addr(addr)
    }

    /// Sends a datagram to the socket at `addr` (a path or an abstract
    /// name), parking while the receiver's queue is full.
    pub fn send_to_addr(&self, buf: &[u8], addr: &SocketAddr) -> io::Result<usize> {
        self.sock.write(|s| s.send_to_addr(buf, addr))
    }

    /// Sends a datagram to the connected peer.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.sock.write(|s| s.send(buf))
    }

    /// Sends a datagram to the socket at `path`.
    pub fn send_to(&self, buf: &[u8], path: impl AsRef<Path>) -> io::Result<usize> {
        let path = path.as_ref();
        self.sock.write(|s| s.send_to(buf, path))
    }

    /// Receives a datagram from the connected peer, parking until one comes.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.read(|s| s.recv(buf))
    }

    /// Receives a datagram and its sender's address.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.sock.read(|s| s.recv_from(buf))
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.inner.local_addr()
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.sock.inner.peer_addr()
    }

    /// Shuts down the read half, the write half or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.sock.inner.shutdown(how)
    }

    /// A second handle to the same socket, with its own wait state.
    pub fn try_clone(&self) -> io::Result<UnixDatagram> {
        Ok(UnixDatagram {
            sock: self.sock.duplicate(self.sock.inner.try_clone()?),
        })
    }

    /// Takes the pending socket error (`SO_ERROR`), if any.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.sock.inner.take_error()
    }
}

impl From<std::os::unix::net::UnixDatagram> for UnixDatagram {
    /// Takes over a std socket, keeping the read and write timeouts it
    /// had. Its calls park, as every fibra socket's (the fd is put in
    /// non-blocking mode for fibra's loop, and the socket starts in
    /// waiting mode even if the std one was non-blocking: see
    /// `set_nonblocking`).
    fn from(inner: std::os::unix::net::UnixDatagram) -> UnixDatagram {
        let _ = inner.set_nonblocking(true);
        let (read, write) = (inner.read_timeout(), inner.write_timeout());
        UnixDatagram {
            sock: Socket::adopt(inner, read, write),
        }
    }
}

impl<'a> IntoIterator for &'a UnixListener {
    type Item = io::Result<UnixStream>;
    type IntoIter = UnixIncoming<'a>;

    /// [`UnixListener::incoming`], as std's `&UnixListener` iterates.
    fn into_iter(self) -> UnixIncoming<'a> {
        self.incoming()
    }
}

fd_traits!(
    UnixListener => std::os::unix::net::UnixListener,
    UnixStream => std::os::unix::net::UnixStream,
    UnixDatagram => std::os::unix::net::UnixDatagram
);
timeouts!(UnixStream, UnixDatagram);
