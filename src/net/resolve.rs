//! What the socket constructors accept as an address, and resolving it
//! without ever blocking a runtime's thread or starting a thread for
//! nothing.
//!
//! std's [`std::net::ToSocketAddrs`] hides whether a value is already an
//! address or a host name that needs a DNS lookup, so a runtime that takes
//! it must treat every call as a possible lookup and send each one to the
//! blocking pool. That cost a thread round trip on every
//! [`UdpSocket::send_to`](crate::net::UdpSocket::send_to), and it started a
//! pool thread for `bind("127.0.0.1:80")`. That thread then lived on for
//! [`KEEP_ALIVE`](crate::blocking::KEEP_ALIVE). A process with a second
//! thread pays more on every fd syscall: the kernel counts references to
//! the file with atomics, which it skips while a single thread owns the fd
//! table.
//!
//! So fibra has its own trait, implemented for the same types as std's,
//! which tells the two cases apart. Numeric addresses resolve in place;
//! only a host name goes to the pool. (tokio's `ToSocketAddrs` is sealed
//! for the same reason.)

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// A value the socket constructors can turn into socket addresses.
///
/// Implemented for the same types as [`std::net::ToSocketAddrs`], with the
/// same meaning. Addresses and numeric strings (`"127.0.0.1:80"`,
/// `("::1", 80)`) resolve at once. A host name (`"example.com:80"`,
/// `("localhost", 80)`) is looked up on the blocking pool while the fiber
/// parks, so other fibers keep running; on a plain thread the lookup blocks
/// the thread, as in std.
///
/// The trait is sealed: only the types listed here implement it.
///
/// ```
/// use std::net::{Ipv4Addr, SocketAddr};
/// use fibra::net::TcpListener;
///
/// fibra::run(|| -> std::io::Result<()> {
///     let a = TcpListener::bind("127.0.0.1:0")?; // a numeric string
///     let b = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?; // an (ip, port) pair
///     let addrs: [SocketAddr; 1] = [b.local_addr()?];
///     let c = TcpListener::bind(&addrs[..]).unwrap_err(); // b holds that port
///     assert_eq!(c.kind(), std::io::ErrorKind::AddrInUse);
///     let d = TcpListener::bind(("localhost", 0))?; // a host name: looked up
///     assert!(d.local_addr()?.ip().is_loopback());
///     drop(a);
///     Ok(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub trait ToSocketAddrs: sealed::Resolve {}

pub(crate) mod sealed {
    use super::*;

    /// What an address value resolves to without a lookup.
    pub enum Resolved<'a> {
        /// The addresses (or the error std would give), found in place.
        Now(io::Result<Vec<SocketAddr>>),
        /// A host name and port: only a DNS lookup can tell.
        Lookup(HostPort<'a>),
        /// A value of std's trait ([`StdAddrs`]): it may look up, so it
        /// resolves on the blocking pool.
        Std(&'a dyn StdResolve),
    }

    /// A value of std's trait, resolved by std (object-safe: std's trait
    /// has an iterator type).
    pub trait StdResolve: Sync {
        fn resolve_std(&self) -> io::Result<Vec<SocketAddr>>;
    }

    /// A host name to look up, in either of the forms std accepts.
    #[derive(Clone, Copy)]
    pub enum HostPort<'a> {
        /// `"host:port"`.
        Joined(&'a str),
        /// `("host", port)`.
        Split(&'a str, u16),
    }

    /// The method behind [`ToSocketAddrs`], out of users' reach.
    pub trait Resolve {
        fn resolve_now(&self) -> Resolved<'_>;
    }
}

use sealed::{HostPort, Resolve, Resolved};

/// Resolves `addr`: in place when it is numeric; a host name is looked up
/// on the blocking pool (inside a runtime) or right here (outside one).
pub(crate) fn resolve<A: ToSocketAddrs + ?Sized>(addr: &A) -> io::Result<Vec<SocketAddr>> {
    match addr.resolve_now() {
        Resolved::Now(addrs) => addrs,
        Resolved::Lookup(name) => crate::blocking::run_borrowing(move || lookup(name)),
        Resolved::Std(value) => crate::blocking::run_borrowing(move || value.resolve_std()),
    }
}

/// Resolves a host name (or any address value) to its socket addresses:
/// tokio's `lookup_host`. A host name is looked up on the blocking pool
/// while the fiber parks; on a plain thread the lookup blocks the thread.
///
/// # Errors
///
/// As [`std::net::ToSocketAddrs::to_socket_addrs`]: a name that does not
/// resolve, a string that is no `host:port`.
///
/// ```
/// fibra::run(|| {
///     let addrs: Vec<_> = fibra::net::lookup_host(("localhost", 80)).unwrap().collect();
///     assert!(addrs.iter().all(|a| a.ip().is_loopback() && a.port() == 80));
///     assert!(fibra::net::lookup_host("no port here").is_err());
/// });
/// ```
pub fn lookup_host(host: impl ToSocketAddrs) -> io::Result<std::vec::IntoIter<SocketAddr>> {
    resolve(&host).map(Vec::into_iter)
}

/// Any value of std's [`std::net::ToSocketAddrs`] — a type of the user's
/// own included — as an address for fibra's sockets.
///
/// fibra's [`ToSocketAddrs`] cannot take every implementor of std's trait
/// itself: a blanket implementation would overlap with its own (coherence),
/// and std's trait does not say whether a value needs a DNS lookup, which
/// fibra must know to keep numeric addresses off the blocking pool. A
/// wrapped value always resolves on the pool (in a fiber), as a lookup may
/// hide behind it.
///
/// ```
/// use std::net::SocketAddr;
///
/// /// An address of the user's own, for std's trait.
/// struct Backend;
/// impl std::net::ToSocketAddrs for Backend {
///     type Iter = std::vec::IntoIter<SocketAddr>;
///     fn to_socket_addrs(&self) -> std::io::Result<Self::Iter> {
///         ("127.0.0.1", 0).to_socket_addrs()
///     }
/// }
///
/// fibra::run(|| {
///     let l = fibra::net::TcpListener::bind(fibra::net::StdAddrs(Backend)).unwrap();
///     assert!(l.local_addr().unwrap().ip().is_loopback());
/// });
/// ```
#[derive(Clone, Copy, Debug)]
pub struct StdAddrs<T>(pub T);

impl<T: std::net::ToSocketAddrs + Sync> ToSocketAddrs for StdAddrs<T> {}
impl<T: std::net::ToSocketAddrs + Sync> Resolve for StdAddrs<T> {
    fn resolve_now(&self) -> Resolved<'_> {
        Resolved::Std(self)
    }
}

impl<T: std::net::ToSocketAddrs + Sync> sealed::StdResolve for StdAddrs<T> {
    fn resolve_std(&self) -> io::Result<Vec<SocketAddr>> {
        self.0.to_socket_addrs().map(Iterator::collect)
    }
}

/// The DNS lookup itself (std's, which calls `getaddrinfo`): blocks.
fn lookup(name: HostPort<'_>) -> io::Result<Vec<SocketAddr>> {
    use std::net::ToSocketAddrs as _;
    match name {
        HostPort::Joined(s) => s.to_socket_addrs().map(Iterator::collect),
        HostPort::Split(host, port) => (host, port).to_socket_addrs().map(Iterator::collect),
    }
}

fn now(addr: impl Into<SocketAddr>) -> Resolved<'static> {
    Resolved::Now(Ok(vec![addr.into()]))
}

macro_rules! numeric {
    ($($t:ty),*) => {$(
        impl ToSocketAddrs for $t {}
        impl Resolve for $t {
            fn resolve_now(&self) -> Resolved<'_> {
                now(*self)
            }
        }
    )*};
}

numeric!(
    SocketAddr,
    SocketAddrV4,
    SocketAddrV6,
    (IpAddr, u16),
    (Ipv4Addr, u16),
    (Ipv6Addr, u16)
);

impl ToSocketAddrs for str {}
impl Resolve for str {
    fn resolve_now(&self) -> Resolved<'_> {
        // As std: a string that parses as an address is one.
        match self.parse::<SocketAddr>() {
            Ok(addr) => now(addr),
            Err(_) => Resolved::Lookup(HostPort::Joined(self)),
        }
    }
}

impl ToSocketAddrs for String {}
impl Resolve for String {
    fn resolve_now(&self) -> Resolved<'_> {
        self.as_str().resolve_now()
    }
}

impl ToSocketAddrs for (&str, u16) {}
impl Resolve for (&str, u16) {
    fn resolve_now(&self) -> Resolved<'_> {
        let (host, port) = *self;
        // As std: a host that parses as an IP address is one.
        match host.parse::<IpAddr>() {
            Ok(ip) => now((ip, port)),
            Err(_) => Resolved::Lookup(HostPort::Split(host, port)),
        }
    }
}

impl ToSocketAddrs for (String, u16) {}
impl Resolve for (String, u16) {
    fn resolve_now(&self) -> Resolved<'_> {
        match self.0.parse::<IpAddr>() {
            Ok(ip) => now((ip, self.1)),
            Err(_) => Resolved::Lookup(HostPort::Split(&self.0, self.1)),
        }
    }
}

impl ToSocketAddrs for [SocketAddr] {}
impl Resolve for [SocketAddr] {
    fn resolve_now(&self) -> Resolved<'_> {
        Resolved::Now(Ok(self.to_vec()))
    }
}

impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {}
impl<T: ToSocketAddrs + ?Sized> Resolve for &T {
    fn resolve_now(&self) -> Resolved<'_> {
        (**self).resolve_now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved_now<A: ToSocketAddrs + ?Sized>(addr: &A) -> Option<Vec<SocketAddr>> {
        match addr.resolve_now() {
            Resolved::Now(addrs) => Some(addrs.unwrap()),
            Resolved::Lookup(_) | Resolved::Std(_) => None,
        }
    }

    #[test]
    fn numeric_addresses_resolve_without_a_lookup() {
        let v4: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let v6: SocketAddr = "[::1]:80".parse().unwrap();
        assert_eq!(resolved_now("127.0.0.1:80"), Some(vec![v4]));
        assert_eq!(resolved_now(&"[::1]:80".to_string()), Some(vec![v6]));
        assert_eq!(resolved_now(&("127.0.0.1", 80)), Some(vec![v4]));
        assert_eq!(resolved_now(&("::1".to_string(), 80)), Some(vec![v6]));
        assert_eq!(resolved_now(&(Ipv4Addr::LOCALHOST, 80)), Some(vec![v4]));
        assert_eq!(resolved_now(&(Ipv6Addr::LOCALHOST, 80)), Some(vec![v6]));
        assert_eq!(
            resolved_now(&(IpAddr::from(Ipv4Addr::LOCALHOST), 80)),
            Some(vec![v4])
        );
        assert_eq!(resolved_now(&v4), Some(vec![v4]));
        assert_eq!(resolved_now(&&v6), Some(vec![v6]));
        assert_eq!(resolved_now(&[v4, v6][..]), Some(vec![v4, v6]));
    }

    #[test]
    fn host_names_are_looked_up() {
        assert!(resolved_now("localhost:80").is_none());
        assert!(resolved_now(&("localhost", 80)).is_none());
        assert!(resolved_now(&("localhost".to_string(), 80)).is_none());
        // The lookup itself, as std does it.
        let addrs = resolve("localhost:80").unwrap();
        assert!(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()));
    }

    #[test]
    fn malformed_strings_fail_as_in_std() {
        // No port: std's lookup refuses it without asking DNS.
        let e = resolve("127.0.0.1").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
