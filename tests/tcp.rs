//! TCP on loopback with real sockets: fibers, threads and runtimes mixed.

mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use fibra::net::{TcpListener, TcpStream};

/// A fiber echo server on an ephemeral port, serving until cancelled.
fn echo_server() -> (SocketAddr, fibra::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = fibra::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            fibra::spawn(move || {
                let mut buf = vec![0; 16 * 1024];
                loop {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if stream.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    (addr, server)
}

/// A message of `len` bytes, different for every (client, round).
fn message(client: usize, round: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i * 31 + client * 7 + round * 13) as u8)
        .collect()
}

#[test]
fn five_hundred_connections_echo_messages_of_many_sizes() {
    fibra::run(|| {
        let (addr, server) = echo_server();
        let sizes = [1usize, 7, 64, 1000, 4096, 65_536, 200_000];
        let clients: Vec<_> = (0..500)
            .map(|c| {
                fibra::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    let mut echoed = 0;
                    for round in 0..3 {
                        let len = sizes[(c + round) % sizes.len()];
                        let msg = message(c, round, len);
                        // Write and read at once: a large message does not
                        // fit in the socket buffers one way.
                        let mut w = s.try_clone().unwrap();
                        let m = msg.clone();
                        let writer = fibra::spawn(move || w.write_all(&m).unwrap());
                        let mut back = vec![0; len];
                        s.read_exact(&mut back).unwrap();
                        writer.join().unwrap();
                        assert!(back == msg, "client {c} round {round}: bytes differ");
                        echoed += len;
                    }
                    echoed
                })
            })
            .collect();
        let total: usize = clients.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(total > 500 * 3);
        server.cancel();
    });
}

#[test]
fn eight_mebibytes_through_one_socket_with_a_reader_and_a_writer_fiber() {
    const LEN: usize = 8 << 20;
    fibra::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let receiver = fibra::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut data = Vec::with_capacity(LEN);
            s.read_to_end(&mut data).unwrap();
            data
        });
        let s = Rc::new(TcpStream::connect(addr).unwrap());
        let w = s.clone();
        let writer = fibra::spawn(move || {
            let data: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
            (&*w).write_all(&data).unwrap();
            w.shutdown(Shutdown::Write).unwrap();
        });
        // Meanwhile another fiber keeps ticking.
        let ticker = fibra::spawn(|| {
            for _ in 0..5 {
                fibra::sleep(Duration::from_millis(1));
            }
        });
        writer.join().unwrap();
        ticker.join().unwrap();
        let data = receiver.join().unwrap();
        assert_eq!(data.len(), LEN);
        assert!(data.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    });
}

#[test]
fn read_and_write_timeouts_while_other_fibers_run() {
    fibra::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let keep = fibra::spawn(move || listener.accept().unwrap().0);
        let mut s = TcpStream::connect(addr).unwrap();
        let _peer = keep.join().unwrap(); // connected, but silent

        let ticks = Rc::new(std::cell::Cell::new(0));
        let t = ticks.clone();
        let ticker = fibra::spawn(move || {
            loop {
                fibra::sleep(Duration::from_millis(2));
                t.set(t.get() + 1);
            }
        });

        // The ticker has not run yet: had the read blocked the thread for
        // its timeout, it would still read 0. Three of the ~100 ticks of
        // 2 ms the 200 ms allow: a loaded machine can hold each up 60 ms
        // and still pass (it was 3 ticks in a timeout of 50 ms).
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        assert_eq!(s.read_timeout().unwrap(), Some(Duration::from_millis(200)));
        let start = Instant::now();
        let err = s.read(&mut [0; 16]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldBlock);
        assert!(start.elapsed() >= Duration::from_millis(200));
        assert!(ticks.get() >= 3, "other fibers did not run during the read");

        // Fill the socket until a write times out (the peer never reads).
        s.set_write_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let chunk = vec![0u8; 64 * 1024];
        let err = loop {
            if let Err(e) = s.write(&chunk) {
                break e;
            }
        };
        assert_eq!(err.kind(), ErrorKind::WouldBlock);
        assert_eq!(
            s.set_read_timeout(Some(Duration::ZERO)).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        ticker.cancel();
    });
}

#[test]
fn connection_refused_and_connect_timeout() {
    // A port with nothing listening: bind, note it, close.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    fibra::run(|| {
        let err = TcpStream::connect(addr).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
        let err = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
        let err = TcpStream::connect_timeout(&addr, Duration::ZERO).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    });
    // And on a plain thread.
    assert_eq!(
        TcpStream::connect(addr).unwrap_err().kind(),
        ErrorKind::ConnectionRefused
    );
}

#[test]
fn a_plain_thread_client_with_a_fiber_server_and_the_reverse() {
    // Fiber server, thread client (blocking in poll).
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        fibra::run(|| {
            let (addr, server) = echo_server();
            tx.send(addr).unwrap();
            fibra::sleep(Duration::from_millis(300));
            server.cancel();
        })
    });
    let addr = rx.recv().unwrap();
    let mut c = TcpStream::connect(addr).unwrap(); // fibra's, on a plain thread
    c.write_all(b"thread says hi").unwrap();
    let mut buf = [0; 14];
    c.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"thread says hi");
    drop(c);
    server.join().unwrap();

    // Thread server (fibra's listener, blocking), fiber client.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
    });
    fibra::run(|| {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"fiber").unwrap();
        let mut buf = [0; 5];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"fiber");
    });
    server.join().unwrap();
}

#[test]
fn sockets_move_between_threads_and_runtimes() {
    // Made and connected on a plain thread, used in a runtime, then in another.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0; 2];
        for _ in 0..2 {
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        }
    });
    let stream = TcpStream::from(std::net::TcpStream::connect(addr).unwrap());
    let stream = std::thread::spawn(move || {
        fibra::run(|| {
            let mut s = stream;
            s.write_all(b"r1").unwrap();
            let mut buf = [0; 2];
            s.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"r1");
            s
        })
    })
    .join()
    .unwrap();
    fibra::run(|| {
        let mut s = stream;
        s.write_all(b"r2").unwrap();
        let mut buf = [0; 2];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"r2");
    });
    peer.join().unwrap();
}

#[test]
fn two_thousand_idle_connections_beside_a_busy_one() {
    fibra::run(|| {
        let (addr, server) = echo_server();
        // Both ends of each connection are in this process, and other tests
        // run beside this one; the runtime raised the soft limit to the hard.
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a valid out-pointer.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
        let n = 2000.min((lim.rlim_cur as usize).saturating_sub(4000) / 2);
        assert!(
            n >= 200,
            "too few file descriptors to test: {}",
            lim.rlim_cur
        );
        let idle: Vec<TcpStream> = (0..n).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut busy = TcpStream::connect(addr).unwrap();
        let start = Instant::now();
        for i in 0..2000u32 {
            busy.write_all(&i.to_le_bytes()).unwrap();
            let mut back = [0; 4];
            busy.read_exact(&mut back).unwrap();
            assert_eq!(u32::from_le_bytes(back), i);
        }
        assert!(start.elapsed() < Duration::from_secs(30));
        // The idle ones still work.
        let mut last = idle.into_iter().last().unwrap();
        last.write_all(b"still here").unwrap();
        let mut buf = [0; 10];
        last.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"still here");
        server.cancel();
    });
}

#[test]
fn a_reused_fd_number_is_never_woken_by_the_old_sockets_events() {
    fibra::run(|| {
        let (addr, server) = echo_server();
        for round in 0..50 {
            // A socket that registers (it waits once), then is closed ...
            let mut a = TcpStream::connect(addr).unwrap();
            a.write_all(b"x").unwrap();
            a.read_exact(&mut [0; 1]).unwrap();
            let fd = std::os::fd::AsRawFd::as_raw_fd(&a);
            drop(a);
            // ... and a new one, likely on the same fd number, that must wait
            // for its own data only.
            let mut b = TcpStream::connect(addr).unwrap();
            if std::os::fd::AsRawFd::as_raw_fd(&b) == fd {
                b.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
                let err = b.read(&mut [0; 1]).unwrap_err();
                assert_eq!(err.kind(), ErrorKind::WouldBlock, "round {round}");
            }
            b.write_all(b"y").unwrap();
            b.set_read_timeout(None).unwrap();
            let mut one = [0; 1];
            b.read_exact(&mut one).unwrap();
            assert_eq!(&one, b"y");
        }
        server.cancel();
    });
}

#[test]
fn half_close_zero_length_reads_and_a_closed_peer_behave_as_in_std() {
    fibra::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = fibra::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut all = Vec::new();
            s.read_to_end(&mut all).unwrap(); // until the client's FIN
            s.write_all(&all).unwrap(); // the server half is still open
            all.len()
        });
        let mut c = TcpStream::connect(addr).unwrap();
        assert_eq!(
            c.read(&mut []).unwrap(),
            0,
            "a zero-length read returns at once"
        );
        c.write_all(b"half").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"half");
        assert_eq!(server.join().unwrap(), 4);

        // Writing to a closed peer: an error (EPIPE/ECONNRESET), no SIGPIPE.
        let err = loop {
            if let Err(e) = c.write(&[0; 1024]) {
                break e;
            }
            fibra::sleep(Duration::from_millis(1));
        };
        assert!(
            matches!(
                err.kind(),
                ErrorKind::BrokenPipe | ErrorKind::ConnectionReset
            ),
            "{err:?}"
        );
    });
}

#[test]
fn peek_nodelay_ttl_and_addresses() {
    fibra::run(|| {
        let (addr, server) = echo_server();
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_nodelay(true).unwrap();
        assert!(c.nodelay().unwrap());
        c.set_ttl(33).unwrap();
        assert_eq!(c.ttl().unwrap(), 33);
        assert_eq!(c.peer_addr().unwrap(), addr);
        c.write_all(b"peek").unwrap();
        let mut buf = [0; 4];
        let n = c.peek(&mut buf).unwrap(); // parks until the echo arrives
        assert!(n > 0 && buf[..n] == b"peek"[..n]);
        c.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"peek");
        assert!(c.take_error().unwrap().is_none());
        server.cancel();
    });
}

#[test]
fn an_accept_loop_survives_running_out_of_file_descriptors() {
    const NAME: &str = "an_accept_loop_survives_running_out_of_file_descriptors";
    if !util::is_child(NAME) {
        return util::assert_child_ok(NAME);
    }
    // Child: a low limit (soft and hard, since a runtime raises the soft
    // limit to the hard one).
    let limit = 128;
    let lim = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: lowering our own limit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    fibra::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // Fill the table, leaving room for the clients and a few more.
        let mut fillers = Vec::new();
        while let Ok(f) = std::fs::File::open("/dev/null") {
            fillers.push(f);
        }
        let clients = 12;
        fillers.truncate(fillers.len() - (clients + 4));
        // All clients connect first (the kernel completes the handshakes
        // into the backlog); then the server can accept only a few until
        // fds free up.
        let conns: Vec<TcpStream> = (0..clients)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let emfiles = Rc::new(std::cell::Cell::new(0));
        let e = emfiles.clone();
        let server = fibra::spawn(move || {
            let mut served = 0;
            while served < clients {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        fibra::spawn(move || {
                            let mut b = [0; 1];
                            s.read_exact(&mut b).unwrap();
                            s.write_all(&b).unwrap();
                        });
                        served += 1;
                    }
                    Err(err) if err.raw_os_error() == Some(libc::EMFILE) => {
                        e.set(e.get() + 1);
                        fibra::sleep(Duration::from_millis(5));
                    }
                    Err(err) => panic!("accept: {err}"),
                }
            }
        });
        let handles: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                fibra::spawn(move || {
                    c.write_all(&[i as u8]).unwrap();
                    let mut b = [0; 1];
                    c.read_exact(&mut b).unwrap();
                    assert_eq!(b[0], i as u8);
                })
            })
            .collect();
        while emfiles.get() == 0 {
            fibra::sleep(Duration::from_millis(5));
        }
        drop(fillers); // descriptors come back: the server recovers
        handles.into_iter().for_each(|h| h.join().unwrap());
        server.join().unwrap();
        assert!(emfiles.get() > 0);
    });
    println!("CHILD OK");
}

#[test]
fn a_socket_that_always_has_data_does_not_starve_the_other_fibers() {
    use std::cell::Cell;
    use std::rc::Rc;

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    const TOTAL: usize = 8 << 20;
    // A thread keeps the socket full: the reader always finds data.
    let writer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let chunk = [1u8; 64 * 1024];
        for _ in 0..TOTAL / chunk.len() {
            s.write_all(&chunk).unwrap();
        }
    });
    fibra::run(|| {
        let ticks = Rc::new(Cell::new(0u32));
        let ticks_seen_by_reader = Rc::new(Cell::new(0u32));
        let t = ticks.clone();
        let ticker = fibra::spawn(move || {
            loop {
                fibra::sleep(Duration::from_millis(1));
                t.set(t.get() + 1);
            }
        });
        let (t, seen) = (ticks.clone(), ticks_seen_by_reader.clone());
        let reader = fibra::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            std::thread::sleep(Duration::from_millis(50)); // let the buffer fill
            let mut buf = [0u8; 16];
            let mut got = 0;
            while got < TOTAL {
                got += s.read(&mut buf).unwrap();
            }
            seen.set(t.get());
        });
        reader.join().unwrap();
        ticker.cancel();
        // 8 MiB in 16-byte reads is half a million calls: without a budget
        // the reader would never park and the ticker would never run.
        assert!(
            ticks_seen_by_reader.get() >= 3,
            "the ticker ran {} times during the read",
            ticks_seen_by_reader.get()
        );
    });
    writer.join().unwrap();
}

/// The names of this process's threads.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).unwrap())
        .map(|name| name.trim().to_string())
        .collect()
}

#[test]
fn numeric_addresses_never_reach_the_blocking_pool() {
    const NAME: &str = "numeric_addresses_never_reach_the_blocking_pool";
    if !util::is_child(NAME) {
        return util::assert_child_ok(NAME);
    }
    // Child: a fresh process, so no pool thread exists yet. Every form of
    // numeric address resolves in place: a pool thread would be a thread
    // round trip per `send_to`, and a second thread makes every fd
    // syscall of the process take the kernel's atomic file references.
    fibra::run(|| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let _a = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _b = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        let _c = TcpStream::connect(("127.0.0.1".to_string(), port)).unwrap();
        let u = fibra::net::UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0)).unwrap();
        let to = u.local_addr().unwrap();
        for _ in 0..10 {
            u.send_to(b"x", to).unwrap();
            u.send_to(b"x", std::net::SocketAddr::to_string(&to))
                .unwrap();
            u.send_to(b"x", &[to][..]).unwrap();
        }
        let names = thread_names();
        assert!(
            !names.iter().any(|n| n.starts_with("fibra-blocking")),
            "{names:?}"
        );
        // A host name does go to the pool (the check above can fail).
        let _d = TcpStream::connect(("localhost", port)).unwrap();
        let names = thread_names();
        assert!(
            names.iter().any(|n| n.starts_with("fibra-blocking")),
            "{names:?}"
        );
    });
    println!("CHILD OK");
}

/// More slices than one `writev` takes (IOV_MAX, 1024): a full write of
/// the first 1024 must not look short and park the next write for a
/// writable edge that never comes (the peer reads only once all is sent).
#[test]
fn vectored_writes_of_more_than_iov_max_slices_do_not_hang() {
    use std::io::IoSlice;
    const SLICES: usize = 3000;
    const EACH: usize = 16;
    let wrote = fibra::run(|| {
        fibra::timeout(Duration::from_secs(20), || {
            let (mut a, mut b) = fibra::net::UnixStream::pair().unwrap();
            // A short read that waits registers `a` with the reactor, whose
            // first writable edge is then spent before the test proper.
            let _ = a.set_read_timeout(Some(Duration::from_millis(20)));
            let _ = a.read(&mut [0u8; 1]);
            fibra::sleep(Duration::from_millis(20));
            let data = vec![7u8; SLICES * EACH];
            let mut slices: Vec<IoSlice<'_>> = data.chunks(EACH).map(IoSlice::new).collect();
            let mut bufs = &mut slices[..];
            let mut total = 0;
            while !bufs.is_empty() {
                let n = a.write_vectored(bufs).unwrap();
                total += n;
                IoSlice::advance_slices(&mut bufs, n);
            }
            drop(a);
            let mut all = Vec::new();
            b.read_to_end(&mut all).unwrap();
            assert_eq!(all.len(), total);
            total
        })
        .expect("the vectored writes hung")
    });
    assert_eq!(wrote, SLICES * EACH);
}
