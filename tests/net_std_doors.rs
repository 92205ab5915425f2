//! The std doors of `fibra::net` (issue 50): fds in and out (`FromRawFd`,
//! `From<OwnedFd>` both ways), UDP multicast, `Debug` as std prints it,
//! `&UnixListener` as an iterator — in fibers and on plain threads.

use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::time::Duration;

/// A listening TCP socket made with socket2 (as a server that sets options
/// std's `bind` does not would make it), with `SO_REUSEPORT`.
fn raw_listener() -> OwnedFd {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.set_reuse_port(true).unwrap();
    let addr = std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    socket.bind(&addr.into()).unwrap();
    socket.listen(16).unwrap();
    socket.into()
}

#[test]
fn fds_become_fibra_sockets_and_back() {
    // In: a hand-made listener becomes a fibra listener (From<OwnedFd>),
    // and serves from a fiber; a std stream's fd becomes a fibra stream
    // (FromRawFd).
    let listener = fibra::net::TcpListener::from(raw_listener());
    let addr = listener.local_addr().unwrap();
    let reuse = socket2::SockRef::from(&listener).reuse_port().unwrap();
    assert!(reuse, "the option set by socket2 is kept");
    let echoed = fibra::run(move || {
        let server = fibra::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 5];
            conn.read_exact(&mut buf).unwrap();
            conn.write_all(&buf).unwrap();
            listener
        });
        let std_stream = std::net::TcpStream::connect(addr).unwrap();
        // SAFETY: the fd of a TCP stream we own, given up by into_raw_fd.
        let mut client = unsafe { fibra::net::TcpStream::from_raw_fd(std_stream.into_raw_fd()) };
        client.write_all(b"hello").unwrap();
        let mut back = [0u8; 5];
        client.read_exact(&mut back).unwrap();
        let listener = server.join().unwrap();
        (back, listener, client)
    });
    let (back, listener, client) = echoed;
    assert_eq!(&back, b"hello");
    // Out: back to std on a plain thread, through OwnedFd.
    let std_listener = std::net::TcpListener::from(OwnedFd::from(listener));
    std_listener.set_nonblocking(false).unwrap();
    assert_eq!(std_listener.local_addr().unwrap(), addr);
    let t = std::thread::spawn(move || std_listener.accept().map(drop));
    let _c = std::net::TcpStream::connect(addr).unwrap();
    t.join().unwrap().unwrap();
    let std_client = std::net::TcpStream::from(OwnedFd::from(client));
    assert!(std_client.peer_addr().is_ok());
    // Unix sockets and UDP too.
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut a = fibra::net::UnixStream::from(OwnedFd::from(a));
    let mut b = fibra::net::UnixStream::from(OwnedFd::from(b));
    fibra::run(move || {
        a.write_all(b"x").unwrap();
        let mut one = [0u8; 1];
        b.read_exact(&mut one).unwrap();
        assert_eq!(&one, b"x");
    });
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_addr = udp.local_addr().unwrap();
    let udp = fibra::net::UdpSocket::from(OwnedFd::from(udp));
    assert_eq!(udp.local_addr().unwrap(), udp_addr);
    let back = socket2::Socket::from(OwnedFd::from(udp));
    assert_eq!(back.local_addr().unwrap().as_socket(), Some(udp_addr));
}

#[test]
fn multicast_options_and_a_group_on_loopback() {
    let group = Ipv4Addr::new(239, 255, 77, 1);
    let rx = fibra::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    let port = rx.local_addr().unwrap().port();
    rx.join_multicast_v4(&group, &Ipv4Addr::LOCALHOST).unwrap();
    rx.set_multicast_loop_v4(true).unwrap();
    assert!(rx.multicast_loop_v4().unwrap());
    rx.set_multicast_ttl_v4(3).unwrap();
    assert_eq!(rx.multicast_ttl_v4().unwrap(), 3);
    rx.set_multicast_loop_v4(false).unwrap();
    assert!(!rx.multicast_loop_v4().unwrap());
    rx.set_multicast_loop_v4(true).unwrap();
    let v6 = fibra::net::UdpSocket::bind("[::1]:0");
    if let Ok(v6) = v6 {
        v6.set_multicast_loop_v6(false).unwrap();
        assert!(!v6.multicast_loop_v6().unwrap());
    }
    // A datagram to the group, sent out through loopback, reaches the
    // member parked in a fiber (where the host routes multicast there).
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let lo = libc::in_addr {
        s_addr: u32::from(Ipv4Addr::LOCALHOST).to_be(),
    };
    // SAFETY: a valid in_addr of the size given.
    unsafe {
        libc::setsockopt(
            tx.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_IF,
            (&raw const lo).cast(),
            size_of::<libc::in_addr>() as libc::socklen_t,
        );
    }
    match tx.send_to(b"to the group", (group, port)) {
        Ok(_) => {
            let got = fibra::run(move || {
                fibra::timeout(Duration::from_secs(5), || {
                    let mut buf = [0u8; 32];
                    let (n, _) = rx.recv_from(&mut buf).unwrap();
                    buf[..n].to_vec()
                })
            });
            match got {
                Ok(data) => assert_eq!(data, b"to the group"),
                Err(_) => eprintln!("SKIPPED: the host's loopback does not loop multicast back"),
            }
            // (Leaving works whether or not it was delivered.)
        }
        Err(e) => eprintln!("SKIPPED: no multicast route on this host: {e}"),
    }
}

#[test]
fn debug_prints_what_std_prints() {
    let listener = fibra::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let fd = listener.as_raw_fd();
    assert_eq!(
        format!("{listener:?}"),
        format!("TcpListener {{ addr: {addr}, fd: {fd} }}")
    );
    let udp = fibra::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let (ua, ufd) = (udp.local_addr().unwrap(), udp.as_raw_fd());
    assert_eq!(
        format!("{udp:?}"),
        format!("UdpSocket {{ addr: {ua}, fd: {ufd} }}")
    );
    let stream = fibra::net::TcpStream::connect(addr).unwrap();
    let text = format!("{stream:?}");
    assert!(text.starts_with("TcpStream { addr: 127.0.0.1:"), "{text}");
    assert!(text.contains(&format!("peer: {addr}")), "{text}");
}

#[test]
fn a_unix_listener_reference_iterates_its_connections() {
    let dir = std::env::temp_dir().join(format!("fibra-unix-iter-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    let listener = fibra::net::UnixListener::bind(&path).unwrap();
    let got = fibra::run(move || {
        let client = fibra::spawn(move || {
            let mut s = fibra::net::UnixStream::connect(&path).unwrap();
            s.write_all(b"hi").unwrap();
        });
        let mut got = Vec::new();
        // `&UnixListener: IntoIterator`, as std's.
        let mut conns = (&listener).into_iter();
        conns
            .next()
            .unwrap()
            .unwrap()
            .read_to_end(&mut got)
            .unwrap();
        client.join().unwrap();
        got
    });
    assert_eq!(got, b"hi");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lookup_host` (tokio's name) in fibers and on a thread, and a user's
/// type of std's `ToSocketAddrs` through `StdAddrs`.
#[test]
fn lookup_host_and_std_addrs() {
    struct Here;
    impl std::net::ToSocketAddrs for Here {
        type Iter = std::vec::IntoIter<std::net::SocketAddr>;
        fn to_socket_addrs(&self) -> std::io::Result<Self::Iter> {
            Ok(vec!["127.0.0.1:0".parse().unwrap()].into_iter())
        }
    }
    let on_thread: Vec<_> = fibra::net::lookup_host("localhost:443").unwrap().collect();
    assert!(!on_thread.is_empty() && on_thread.iter().all(|a| a.port() == 443));
    fibra::run(|| {
        let fibers: Vec<_> = (0..20u16)
            .map(|i| {
                fibra::spawn(move || {
                    let addrs: Vec<_> = fibra::net::lookup_host(("localhost", 1000 + i))
                        .unwrap()
                        .collect();
                    assert!(
                        addrs
                            .iter()
                            .all(|a| a.ip().is_loopback() && a.port() == 1000 + i)
                    );
                })
            })
            .collect();
        for f in fibers {
            f.join().unwrap();
        }
        assert!(fibra::net::lookup_host("no-port").is_err());
        let l = fibra::net::TcpListener::bind(fibra::net::StdAddrs(Here)).unwrap();
        assert!(l.local_addr().unwrap().ip().is_loopback());
    });
}

/// `set_nonblocking(true)` makes a call that would wait say `WouldBlock`
/// at once — accept, read, recv, on TCP, UDP and Unix sockets, in a fiber
/// and on a plain thread — and `false` makes it wait again.
#[test]
fn nonblocking_sockets_say_would_block_at_once() {
    use std::io::ErrorKind::WouldBlock;
    use std::time::Instant;

    fn check(what: &str) {
        let listener = fibra::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let start = Instant::now();
        assert_eq!(
            listener.accept().unwrap_err().kind(),
            WouldBlock,
            "{what}: accept"
        );
        let addr = listener.local_addr().unwrap();
        let mut client = fibra::net::TcpStream::connect(addr).unwrap();
        client.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(
            client.read(&mut buf).unwrap_err().kind(),
            WouldBlock,
            "{what}: read"
        );
        let udp = fibra::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        assert_eq!(
            udp.recv_from(&mut buf).unwrap_err().kind(),
            WouldBlock,
            "{what}: recv"
        );
        let (ua, _ub) = fibra::net::UnixDatagram::pair().unwrap();
        ua.set_nonblocking(true).unwrap();
        assert_eq!(
            ua.recv(&mut buf).unwrap_err().kind(),
            WouldBlock,
            "{what}: unix recv"
        );
        let (mut sa, _sb) = fibra::net::UnixStream::pair().unwrap();
        sa.set_nonblocking(true).unwrap();
        assert_eq!(
            sa.read(&mut buf).unwrap_err().kind(),
            WouldBlock,
            "{what}: unix read"
        );
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{what}: nothing waited"
        );
        // A timeout set meanwhile is kept, and back in blocking mode the
        // read waits for it.
        client
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        assert_eq!(
            client.read_timeout().unwrap(),
            Some(Duration::from_millis(50))
        );
        client.set_nonblocking(false).unwrap();
        let start = Instant::now();
        assert_eq!(
            client.read(&mut buf).unwrap_err().kind(),
            WouldBlock,
            "{what}: timed out"
        );
        assert!(
            start.elapsed() >= Duration::from_millis(45),
            "{what}: it waited"
        );
        // A connection that comes is accepted by the non-blocking listener.
        let (mut conn, _) = loop {
            match listener.accept() {
                Ok(c) => break c,
                Err(e) if e.kind() == WouldBlock => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => panic!("{what}: {e}"),
            }
        };
        conn.write_all(b"x").unwrap();
        assert_eq!(client.read(&mut buf).unwrap(), 1);
    }
    check("thread");
    fibra::run(|| check("fiber"));
}

/// Unix sockets by `SocketAddr`, abstract names included (no file to
/// clean up): a listener, a stream and datagrams, in fibers.
#[test]
fn unix_sockets_by_abstract_address() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::SocketAddr;
    let name = |what: &str| {
        let n = format!("fibra-test-{what}-{}", std::process::id());
        SocketAddr::from_abstract_name(n.as_bytes()).unwrap()
    };
    let (stream_addr, dgram_addr) = (name("stream"), name("dgram"));
    let listener = fibra::net::UnixListener::bind_addr(&stream_addr).unwrap();
    let receiver = fibra::net::UnixDatagram::bind_addr(&dgram_addr).unwrap();
    let (got, datagram) = fibra::run(move || {
        let server = fibra::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap(); // parks
            let mut buf = Vec::new();
            conn.read_to_end(&mut buf).unwrap();
            buf
        });
        let dgram = fibra::spawn(move || {
            let mut buf = [0u8; 16];
            let n = receiver.recv(&mut buf).unwrap(); // parks
            buf[..n].to_vec()
        });
        fibra::yield_now();
        let mut client = fibra::net::UnixStream::connect_addr(&stream_addr).unwrap();
        client.write_all(b"abstract").unwrap();
        drop(client);
        let sender = fibra::net::UnixDatagram::unbound().unwrap();
        sender.send_to_addr(b"datagram", &dgram_addr).unwrap();
        let connected = fibra::net::UnixDatagram::unbound().unwrap();
        connected.connect_addr(&dgram_addr).unwrap();
        (server.join().unwrap(), dgram.join().unwrap())
    });
    assert_eq!(got, b"abstract");
    assert_eq!(datagram, b"datagram");
}

/// Timeouts and the non-blocking mode belong to the socket, as the
/// kernel's do for std: set through a `try_clone` they hold for the
/// original and the other way round, also for a clone of a clone and
/// after the original is gone; a std socket's timeouts carry over into
/// fibra and back out.
#[test]
fn timeouts_and_mode_are_shared_with_clones_and_kept_across_std() {
    use std::io::ErrorKind::WouldBlock;
    use std::time::Instant;

    fn timed_out(mut s: &fibra::net::TcpStream, what: &str) -> Duration {
        let start = Instant::now();
        let err = s.read(&mut [0u8; 8]).unwrap_err();
        assert_eq!(err.kind(), WouldBlock, "{what}");
        start.elapsed()
    }

    fn check(what: &str) {
        let listener = fibra::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = fibra::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_b, _) = listener.accept().unwrap();
        let ms = Duration::from_millis;

        // Set on the original, seen by a clone made before and one after.
        let early = a.try_clone().unwrap();
        a.set_read_timeout(Some(ms(40))).unwrap();
        let late = a.try_clone().unwrap();
        for (s, name) in [(&early, "early clone"), (&late, "late clone")] {
            assert_eq!(s.read_timeout().unwrap(), Some(ms(40)), "{what}: {name}");
            assert!(timed_out(s, name) >= ms(35), "{what}: {name} waited");
        }
        // Set on a clone, seen by the original and the other clone. (A read
        // timeout of 400 ms: a read that missed the non-blocking mode below
        // would wait that long, twice the 200 ms a loaded machine may take
        // for one that returns at once; it was 15 ms against 20.)
        late.set_read_timeout(Some(ms(400))).unwrap();
        late.set_write_timeout(Some(ms(30))).unwrap();
        assert_eq!(a.read_timeout().unwrap(), Some(ms(400)), "{what}");
        assert_eq!(early.write_timeout().unwrap(), Some(ms(30)), "{what}");
        // The mode too, both ways.
        early.set_nonblocking(true).unwrap();
        assert!(timed_out(&a, "original, non-blocking") < ms(200), "{what}");
        let grandchild = late.try_clone().unwrap();
        drop(a);
        grandchild.set_nonblocking(false).unwrap();
        assert!(
            timed_out(&early, "early, blocking again") >= ms(350),
            "{what}"
        );
        grandchild.set_read_timeout(None).unwrap();
        assert_eq!(early.read_timeout().unwrap(), None, "{what}");

        // In from std, with the kernel's timeouts; out to std, with fibra's.
        let std_stream = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_c, _) = listener.accept().unwrap();
        std_stream.set_read_timeout(Some(ms(25))).unwrap();
        std_stream.set_write_timeout(Some(ms(35))).unwrap();
        // (The kernel keeps them in its ticks: 25 ms may read back as 28.)
        let near = |got: Option<Duration>, want| {
            let got = got.unwrap();
            assert!(got >= want && got <= want + ms(10), "{what}: {got:?}");
        };
        let fibra_stream = fibra::net::TcpStream::from(std_stream);
        near(fibra_stream.read_timeout().unwrap(), ms(25));
        near(fibra_stream.write_timeout().unwrap(), ms(35));
        assert!(timed_out(&fibra_stream, "from std") >= ms(20), "{what}");
        fibra_stream.set_read_timeout(Some(ms(45))).unwrap();
        let back = std::net::TcpStream::from(OwnedFd::from(fibra_stream));
        near(back.read_timeout().unwrap(), ms(45));
        back.set_nonblocking(false).unwrap();
        let start = Instant::now();
        assert_eq!((&back).read(&mut [0u8; 8]).unwrap_err().kind(), WouldBlock);
        assert!(start.elapsed() >= ms(40), "{what}: the kernel's timeout");
    }
    check("thread");
    fibra::run(|| check("fiber"));
    // Clones used from two threads and a runtime at once: sets on one side,
    // reads on the other, no torn state.
    let (mut a, _b) = fibra::net::UnixStream::pair().unwrap();
    let clones: Vec<_> = (0..4).map(|_| a.try_clone().unwrap()).collect();
    let setter = std::thread::spawn(move || {
        for i in 1..=2000u64 {
            clones[(i % 4) as usize]
                .set_write_timeout(Some(Duration::from_micros(i)))
                .unwrap();
        }
        clones
    });
    while !setter.is_finished() {
        let t = a.write_timeout().unwrap().unwrap_or_default();
        assert!(t <= Duration::from_micros(2000));
        let _ = a.try_clone().unwrap();
    }
    let clones = setter.join().unwrap();
    assert_eq!(
        clones[0].write_timeout().unwrap(),
        Some(Duration::from_micros(2000))
    );
    a.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    assert_eq!(a.read(&mut [0u8; 1]).unwrap_err().kind(), WouldBlock);
}

/// `only_v6` reads what the socket was bound with; setting it on a bound
/// listener is the kernel's error, as with std.
#[test]
#[allow(deprecated)]
fn a_listener_reports_only_v6() {
    let Ok(std_listener) = std::net::TcpListener::bind("[::1]:0") else {
        eprintln!("SKIPPED a_listener_reports_only_v6: no IPv6 loopback here");
        return;
    };
    let want = std_listener.only_v6().unwrap();
    let listener = fibra::net::TcpListener::from(std_listener);
    assert_eq!(listener.only_v6().unwrap(), want);
    assert!(listener.set_only_v6(!want).is_err());
    let v4 = fibra::net::TcpListener::bind("127.0.0.1:0").unwrap();
    assert!(v4.only_v6().is_err());
}
