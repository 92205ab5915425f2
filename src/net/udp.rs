//! UDP: [`UdpSocket`], std's type in non-blocking mode behind the loop of
//! `registration.rs`.

use std::io;
use std::net::SocketAddr;

use crate::net::macros::{fd_traits, timeouts};
use crate::net::resolve::{ToSocketAddrs, resolve};
use crate::net::socket::Socket;

/// A UDP socket; like [`std::net::UdpSocket`], but sends and receives park
/// the fiber.
///
/// ```
/// use fibra::net::UdpSocket;
///
/// fibra::run(|| {
///     let a = UdpSocket::bind("127.0.0.1:0").unwrap();
///     let b = UdpSocket::bind("127.0.0.1:0").unwrap();
///     let b_addr = b.local_addr().unwrap();
///     let receiver = fibra::spawn(move || {
///         let mut buf = [0; 16];
///         let (n, from) = b.recv_from(&mut buf).unwrap(); // parks until it comes
///         (buf[..n].to_vec(), from)
///     });
///     a.send_to(b"datagram", b_addr).unwrap();
///     let (data, from) = receiver.join().unwrap();
///     assert_eq!(data, b"datagram");
///     assert_eq!(from, a.local_addr().unwrap());
/// });
/// ```
#[derive(Debug)]
pub struct UdpSocket {
    sock: Socket<std::net::UdpSocket>,
}

impl UdpSocket {
    /// Binds a socket to `addr`.
    ///
    /// # Errors
    ///
    /// As [`std::net::UdpSocket::bind`].
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let inner = std::net::UdpSocket::bind(&resolve(&addr)?[..])?;
        inner.set_nonblocking(true)?;
        Ok(UdpSocket {
            sock: Socket::new(inner),
        })
    }

    /// Receives a datagram and its sender, parking until one comes.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.sock.read(|s| s.recv_from(buf))
    }

    /// Like [`recv_from`](Self::recv_from), leaving the datagram queued.
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.sock.read(|s| s.peek_from(buf))
    }

    /// Sends a datagram to `addr`.
    pub fn send_to(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<usize> {
        let addr = resolve(&addr)?
            .into_iter()
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to send to"))?;
        self.sock.write(|s| s.send_to(buf, addr))
    }

    /// Sets the default peer: `send` and `recv` then talk to it only.
    pub fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        self.sock.inner.connect(&resolve(&addr)?[..])
    }

    /// Sends a datagram to the connected peer.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.sock.write(|s| s.send(buf))
    }

    /// Receives a datagram from the connected peer.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.read(|s| s.recv(buf))
    }

    /// Like [`recv`](Self::recv), leaving the datagram queued.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.read(|s| s.peek(buf))
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.inner.local_addr()
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.sock.inner.peer_addr()
    }

    /// A second handle to the same socket, with its own wait state.
    pub fn try_clone(&self) -> io::Result<UdpSocket> {
        Ok(UdpSocket {
            sock: self.sock.duplicate(self.sock.inner.try_clone()?),
        })
    }

    /// Sets `SO_BROADCAST`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.sock.inner.set_broadcast(on)
    }

    /// Reads `SO_BROADCAST`.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.sock.inner.broadcast()
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

impl From<std::net::UdpSocket> for UdpSocket {
    /// Takes over a std socket (and puts it in non-blocking mode).
    fn from(inner: std::net::UdpSocket) -> UdpSocket {
        let _ = inner.set_nonblocking(true);
        UdpSocket {
            sock: Socket::new(inner),
        }
    }
}

fd_traits!(UdpSocket);
timeouts!(UdpSocket);
