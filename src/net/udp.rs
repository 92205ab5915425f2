//! UDP: [`UdpSocket`], std's type in non-blocking mode behind the loop of
//! `registration.rs`.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

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

/// Multicast, as std's `UdpSocket` has it (the options go to the kernel as
/// they are).
impl UdpSocket {
    /// Joins the IPv4 group `group` on the interface with address
    /// `interface` (`Ipv4Addr::UNSPECIFIED`: the kernel's choice).
    ///
    /// ```
    /// use std::net::Ipv4Addr;
    ///
    /// let s = fibra::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    /// s.join_multicast_v4(&Ipv4Addr::new(239, 1, 2, 3), &Ipv4Addr::LOCALHOST).unwrap();
    /// s.leave_multicast_v4(&Ipv4Addr::new(239, 1, 2, 3), &Ipv4Addr::LOCALHOST).unwrap();
    /// ```
    pub fn join_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.sock.inner.join_multicast_v4(group, interface)
    }

    /// Joins the IPv6 group `group` on interface index `interface` (0: the
    /// kernel's choice).
    pub fn join_multicast_v6(&self, group: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.sock.inner.join_multicast_v6(group, interface)
    }

    /// Leaves an IPv4 group joined with [`join_multicast_v4`](Self::join_multicast_v4).
    pub fn leave_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.sock.inner.leave_multicast_v4(group, interface)
    }

    /// Leaves an IPv6 group joined with [`join_multicast_v6`](Self::join_multicast_v6).
    pub fn leave_multicast_v6(&self, group: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.sock.inner.leave_multicast_v6(group, interface)
    }

    /// Sets `IP_MULTICAST_LOOP`: whether this host's own sockets receive
    /// what it sends to a group.
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        self.sock.inner.set_multicast_loop_v4(on)
    }

    /// Reads `IP_MULTICAST_LOOP`.
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        self.sock.inner.multicast_loop_v4()
    }

    /// Sets `IP_MULTICAST_TTL` (1, the default, keeps datagrams on the
    /// local network).
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        self.sock.inner.set_multicast_ttl_v4(ttl)
    }

    /// Reads `IP_MULTICAST_TTL`.
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        self.sock.inner.multicast_ttl_v4()
    }

    /// Sets `IPV6_MULTICAST_LOOP`.
    pub fn set_multicast_loop_v6(&self, on: bool) -> io::Result<()> {
        self.sock.inner.set_multicast_loop_v6(on)
    }

    /// Reads `IPV6_MULTICAST_LOOP`.
    pub fn multicast_loop_v6(&self) -> io::Result<bool> {
        self.sock.inner.multicast_loop_v6()
    }
}

impl From<std::net::UdpSocket> for UdpSocket {
    /// Takes over a std socket, keeping the read and write timeouts it
    /// had. Its calls park, as every fibra socket's (the fd is put in
    /// non-blocking mode for fibra's loop, and the socket starts in
    /// waiting mode even if the std one was non-blocking: see
    /// `set_nonblocking`).
    fn from(inner: std::net::UdpSocket) -> UdpSocket {
        let _ = inner.set_nonblocking(true);
        let (read, write) = (inner.read_timeout(), inner.write_timeout());
        UdpSocket {
            sock: Socket::adopt(inner, read, write),
        }
    }
}

fd_traits!(UdpSocket => std::net::UdpSocket);
timeouts!(UdpSocket);
