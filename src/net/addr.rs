//! Converting between std socket addresses and the kernel's `sockaddr`,
//! for the few calls std does not make for us (binding with `SO_REUSEPORT`,
//! `accept4` with the peer's address).

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// The `sockaddr` of `addr`, and its length.
pub(crate) fn to_sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&raw mut storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&raw mut storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// Room for the address of any IP peer, for a call to fill.
pub(crate) struct SockAddrBuf {
    pub(crate) storage: libc::sockaddr_storage,
    pub(crate) len: libc::socklen_t,
}

impl SockAddrBuf {
    pub(crate) fn new() -> SockAddrBuf {
        SockAddrBuf {
            // SAFETY: sockaddr_storage is plain data; all-zero is valid.
            storage: unsafe { std::mem::zeroed() },
            len: size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        }
    }

    /// The IPv4 or IPv6 address the call wrote.
    pub(crate) fn to_socket_addr(&self) -> io::Result<SocketAddr> {
        let len = self.len as usize;
        match i32::from(self.storage.ss_family) {
            libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
                // SAFETY: the kernel wrote a sockaddr_in (family and length
                // say so); sockaddr_storage is aligned for it.
                let a = unsafe { &*(&raw const self.storage).cast::<libc::sockaddr_in>() };
                Ok(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes()),
                    u16::from_be(a.sin_port),
                )))
            }
            libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above, for a sockaddr_in6.
                let a = unsafe { &*(&raw const self.storage).cast::<libc::sockaddr_in6>() };
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(a.sin6_addr.s6_addr),
                    u16::from_be(a.sin6_port),
                    a.sin6_flowinfo,
                    a.sin6_scope_id,
                )))
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not an IPv4 or IPv6 socket address",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_survive_the_round_trip_through_sockaddr() {
        for addr in ["127.0.0.1:80", "[::1]:443", "[fe80::1%2]:8080", "0.0.0.0:0"] {
            let addr: SocketAddr = addr.parse().unwrap();
            let (storage, len) = to_sockaddr(&addr);
            let buf = SockAddrBuf { storage, len };
            assert_eq!(buf.to_socket_addr().unwrap(), addr);
        }
        let mut unix = SockAddrBuf::new();
        unix.storage.ss_family = libc::AF_UNIX as libc::sa_family_t;
        assert!(unix.to_socket_addr().is_err());
    }
}
