//! The `hook` feature: unmodified blocking code — std's sockets and sleep,
//! the sync `redis` client, `ureq` — parks fibers instead of blocking the
//! thread, and keeps std's promises.
#![cfg(feature = "hook")]

#[path = "util/mini_redis.rs"]
mod mini;
mod util;

use std::cell::Cell;
use std::collections::HashSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::thread;
use std::time::{Duration, Instant};

use util::bounded;

/// A fiber that ticks every 5 ms until `stop` is set; returns the ticks and
/// the longest gap between two of them.
fn ticker(stop: Rc<Cell<bool>>) -> fibra::JoinHandle<(u32, Duration)> {
    fibra::spawn(move || {
        let (mut ticks, mut worst) = (0, Duration::ZERO);
        let mut last = Instant::now();
        while !stop.get() {
            fibra::sleep(Duration::from_millis(5));
            ticks += 1;
            worst = worst.max(last.elapsed());
            last = Instant::now();
        }
        (ticks, worst)
    })
}

/// A std echo server on a thread of its own, every connection served by a
/// fiber with std's blocking calls (the hook parks them).
fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        fibra::run(move || {
            loop {
                let Ok((mut conn, _)) = listener.accept() else {
                    return;
                };
                fibra::spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        match conn.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if conn.write_all(&buf[..n]).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        })
    });
    addr
}

#[test]
fn std_sleep_parks() {
    bounded(Duration::from_secs(30), || {
        let start = Instant::now();
        let ends = fibra::run(|| {
            let fibers: Vec<_> = (0..20)
                .map(|_| {
                    fibra::spawn(move || {
                        std::thread::sleep(Duration::from_millis(300));
                        start.elapsed()
                    })
                })
                .collect();
            fibers
                .into_iter()
                .map(|f| f.join().unwrap())
                .collect::<Vec<_>>()
        });
        for end in &ends {
            assert!(*end >= Duration::from_millis(300), "woke early: {end:?}");
        }
        let last = ends.iter().max().unwrap();
        // Together, not one after another (20 × 300 ms = 6 s).
        assert!(*last < Duration::from_secs(3), "{ends:?}");
    });
}

#[test]
fn two_hundred_connects_on_one_thread() {
    bounded(Duration::from_secs(60), || {
        // The server answers each connection 200 ms after it comes.
        let listener = fibra::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            fibra::run(move || {
                loop {
                    let Ok((mut conn, _)) = listener.accept() else {
                        return;
                    };
                    fibra::spawn(move || {
                        fibra::sleep(Duration::from_millis(200));
                        let _ = conn.write_all(b"hello");
                    });
                }
            })
        });
        let start = Instant::now();
        let (ticks, worst) = fibra::run(|| {
            let stop = Rc::new(Cell::new(false));
            let tick = ticker(stop.clone());
            let clients: Vec<_> = (0..200)
                .map(|_| {
                    fibra::spawn(move || {
                        let mut s = TcpStream::connect(addr).unwrap();
                        let mut buf = [0u8; 5];
                        s.read_exact(&mut buf).unwrap();
                        assert_eq!(&buf, b"hello");
                    })
                })
                .collect();
            for c in clients {
                c.join().unwrap();
            }
            stop.set(true);
            tick.join().unwrap()
        });
        // Each client's read waits 200 ms: had the hook blocked the thread
        // in a read (or a connect), the 200 would take 40 s in turn and the
        // ticker would stall 200 ms at a time. Concurrency is what `took`
        // proves; the ticker's worst gap is a bound that five reads blocked
        // in turn would break, generous for a loaded 2-core machine (it read
        // 270 ms once beside the other tests of this file, whose 200 pool
        // threads for connects were starting meanwhile).
        let took = start.elapsed();
        assert!(took < Duration::from_secs(5), "took {took:?}");
        // (A blocked thread would let it tick about twice: between the
        // runs of reads blocked in turn. 20 failed once in six runs under
        // two CPU hogs, on a host that also loses a quarter of its CPU to
        // steal.)
        assert!(ticks >= 5, "the ticker ticked {ticks} times");
        assert!(
            worst < Duration::from_millis(1000),
            "the ticker stalled {worst:?}"
        );
    });
}

#[test]
fn read_timeout_fires_on_time() {
    bounded(Duration::from_secs(30), || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        fibra::run(|| {
            let stop = Rc::new(Cell::new(false));
            let tick = ticker(stop.clone());
            let mut s = TcpStream::connect(addr).unwrap();
            let (_peer, _) = listener.accept().unwrap(); // says nothing
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let start = Instant::now();
            let err = s.read(&mut [0u8; 16]).unwrap_err();
            let took = start.elapsed();
            assert_eq!(err.kind(), ErrorKind::WouldBlock, "{err}");
            assert!(took >= Duration::from_millis(200), "{took:?}");
            assert!(took < Duration::from_millis(1000), "{took:?}");
            // Writes time out too, with std's error.
            s.set_write_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let chunk = vec![7u8; 1 << 20];
            let err = loop {
                if let Err(e) = s.write_all(&chunk) {
                    break e;
                }
            };
            assert_eq!(err.kind(), ErrorKind::WouldBlock, "{err}");
            stop.set(true);
            let (ticks, _) = tick.join().unwrap();
            // The ticker first runs when this fiber parks: had the read and
            // the writes blocked the thread, it would tick at most twice
            // (once behind the connect, once when joined).
            // Five of the ~60 ticks of 5 ms in the 300 ms of timeouts: a
            // loaded machine can stretch a tick tenfold and still pass.
            assert!(
                ticks >= 5,
                "the others did not run meanwhile: {ticks} ticks"
            );
        });
    });
}

#[test]
fn user_nonblocking_socket_gets_would_block() {
    bounded(Duration::from_secs(30), || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        fibra::run(|| {
            let s = TcpStream::connect(addr).unwrap();
            let (peer, _) = listener.accept().unwrap();
            s.set_nonblocking(true).unwrap();
            let start = Instant::now();
            let err = (&s).read(&mut [0u8; 16]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::WouldBlock);
            // A duplicate shares the mode, as in the kernel.
            let dup = s.try_clone().unwrap();
            let err = (&dup).read(&mut [0u8; 16]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::WouldBlock);
            // A non-blocking listener too.
            listener.set_nonblocking(true).unwrap();
            assert_eq!(listener.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
            listener.set_nonblocking(false).unwrap();
            // Had any of them waited, it would wait for ever (the peer says
            // nothing, no one connects): 1 s only says none did, with room
            // for a loaded machine to hold this thread up.
            assert!(start.elapsed() < Duration::from_secs(1));
            // And back to blocking: the read waits, until the peer closes.
            s.set_nonblocking(false).unwrap();
            let w = fibra::spawn(move || {
                fibra::sleep(Duration::from_millis(50));
                drop(peer);
            });
            let start = Instant::now();
            assert_eq!((&dup).read(&mut [0u8; 16]).unwrap(), 0); // EOF after the wait
            assert!(start.elapsed() >= Duration::from_millis(40));
            w.join().unwrap();
        });
    });
}

#[test]
fn plain_threads_unchanged() {
    bounded(Duration::from_secs(30), || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            thread::sleep(Duration::from_millis(100));
            c.write_all(b"late").unwrap();
            let mut buf = [0u8; 4];
            c.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"back");
        });
        // Timed from before the connect: the server's 100 ms start at
        // its accept, which cannot come earlier.
        let start = Instant::now();
        let mut s = TcpStream::connect(addr).unwrap();
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).unwrap(); // blocks this thread
        assert!(start.elapsed() >= Duration::from_millis(90));
        assert_eq!(&buf, b"late");
        s.write_all(b"back").unwrap();
        server.join().unwrap();
        // A timeout on a plain thread is the kernel's.
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let err = s.read(&mut buf).unwrap_or(1);
        assert!(err <= 1);
        let start = Instant::now();
        thread::sleep(Duration::from_millis(50));
        assert!(start.elapsed() >= Duration::from_millis(50));
        // A fiber's runtime on another thread changes nothing here: this
        // sleep does not wait for that runtime's fiber, which sleeps 1 s
        // (500 ms leaves a loaded machine room to be late by 480).
        let t = thread::spawn(|| fibra::run(|| std::thread::sleep(Duration::from_secs(1))));
        let start = Instant::now();
        thread::sleep(Duration::from_millis(20));
        assert!(start.elapsed() < Duration::from_millis(500));
        t.join().unwrap();
    });
}

#[test]
fn fifty_fibers_echo_a_mebibyte_each() {
    bounded(Duration::from_secs(120), || {
        let addr = echo_server();
        const LEN: usize = 1 << 20;
        fibra::run(|| {
            let fibers: Vec<_> = (0..50u8)
                .map(|id| {
                    fibra::spawn(move || {
                        let s = TcpStream::connect(addr).unwrap();
                        let mut w = s.try_clone().unwrap();
                        let writer = fibra::spawn(move || {
                            let data: Vec<u8> = (0..LEN).map(|i| (i as u8) ^ id).collect();
                            for part in data.chunks(100_000) {
                                w.write_all(part).unwrap();
                            }
                        });
                        let mut r = s;
                        let mut got = vec![0u8; LEN];
                        r.read_exact(&mut got).unwrap();
                        writer.join().unwrap();
                        for (i, b) in got.iter().enumerate() {
                            assert_eq!(*b, (i as u8) ^ id, "fiber {id}, byte {i}");
                        }
                    })
                })
                .collect();
            for f in fibers {
                f.join().unwrap();
            }
        });
    });
}

#[test]
fn two_thousand_connect_close_cycles_reuse_fds() {
    bounded(Duration::from_secs(120), || {
        let addr = echo_server();
        let fds = fibra::run(|| {
            let fibers: Vec<_> = (0..4u32)
                .map(|f| {
                    fibra::spawn(move || {
                        let mut fds = HashSet::new();
                        for i in 0..500u32 {
                            let mut s = TcpStream::connect(addr).unwrap();
                            fds.insert(s.as_raw_fd());
                            let msg = (f * 1_000_000 + i).to_le_bytes();
                            s.write_all(&msg).unwrap();
                            let mut back = [0u8; 4];
                            s.read_exact(&mut back).unwrap();
                            assert_eq!(back, msg, "fiber {f} cycle {i}: another socket's data");
                            if i % 3 == 0 {
                                // Some end with a read parked at the close.
                                s.shutdown(std::net::Shutdown::Write).unwrap();
                                assert_eq!(s.read(&mut back).unwrap(), 0);
                            }
                        }
                        fds
                    })
                })
                .collect();
            fibers
                .into_iter()
                .flat_map(|f| f.join().unwrap())
                .collect::<HashSet<_>>()
        });
        // Without reuse, 2 000 numbers; other tests of this binary open
        // hundreds of sockets at once meanwhile, which move the lowest free
        // number up while they last.
        assert!(
            fds.len() < 1000,
            "fd numbers were not reused: {}",
            fds.len()
        );
    });
}

#[test]
fn fiber_blocked_on_a_socket_wakes_for_its_own_data_only() {
    bounded(Duration::from_secs(30), || {
        let addr = echo_server();
        fibra::run(|| {
            // A fiber waits on fd N; meanwhile fd numbers come and go around it.
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let laddr = listener.local_addr().unwrap();
            let waiter = fibra::spawn(move || {
                let mut s = TcpStream::connect(laddr).unwrap();
                let mut buf = [0u8; 3];
                s.read_exact(&mut buf).unwrap();
                buf
            });
            let (mut peer, _) = listener.accept().unwrap();
            for i in 0..200u32 {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(&i.to_le_bytes()).unwrap();
                let mut back = [0u8; 4];
                s.read_exact(&mut back).unwrap();
                assert_eq!(back, i.to_le_bytes());
            }
            assert!(!waiter.is_finished());
            peer.write_all(b"end").unwrap();
            assert_eq!(&waiter.join().unwrap(), b"end");
        });
    });
}

#[test]
fn poll_connect_timeout_parks() {
    bounded(Duration::from_secs(30), || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        fibra::run(|| {
            let stop = Rc::new(Cell::new(false));
            let tick = ticker(stop.clone());
            // connect_timeout is std's poll loop.
            let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
            drop(s);
            // A poll that times out parks for its time.
            let (r, _w) = std::io::pipe().unwrap();
            let mut pfd = libc::pollfd {
                fd: r.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let start = Instant::now();
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, 300) };
            assert_eq!(n, 0);
            assert!(start.elapsed() >= Duration::from_millis(300));
            stop.set(true);
            let (ticks, _) = tick.join().unwrap();
            // Had the poll blocked the thread, the ticker would tick at most
            // twice (once behind the connect, once when joined). Five of the
            // ~60 ticks of 5 ms in the 300 ms: a tick stretched tenfold by a
            // loaded machine still passes (the bound was 10 in 100 ms).
            assert!(ticks >= 5, "{ticks}");
        });
    });
}

#[test]
fn redis_sync_client_in_fifty_fibers() {
    let Some(server) = mini::redis_server() else {
        eprintln!("SKIPPED redis_sync_client_in_fifty_fibers: no redis-server on PATH");
        return;
    };
    let port = server.port;
    bounded(Duration::from_secs(60), move || {
        let url = format!("redis://127.0.0.1:{port}/");
        let start = Instant::now();
        fibra::run(|| {
            let stop = Rc::new(Cell::new(false));
            let tick = ticker(stop.clone());
            let fibers: Vec<_> = (0..50)
                .map(|f| {
                    let url = url.clone();
                    fibra::spawn(move || {
                        let client = redis::Client::open(url.as_str()).unwrap();
                        let mut con = client.get_connection().unwrap();
                        for i in 0..50 {
                            let key = format!("fibra:{f}:{i}");
                            let value = format!("value {f} {i}");
                            let () = redis::cmd("SET")
                                .arg(&key)
                                .arg(&value)
                                .query(&mut con)
                                .unwrap();
                            let got: String = redis::cmd("GET").arg(&key).query(&mut con).unwrap();
                            assert_eq!(got, value);
                        }
                    })
                })
                .collect();
            for f in fibers {
                f.join().unwrap();
            }
            stop.set(true);
            let (_, worst) = tick.join().unwrap();
            assert!(
                worst < Duration::from_millis(500),
                "the thread stalled {worst:?}"
            );
        });
        eprintln!("redis: 50 fibers x 50 SET/GET in {:?}", start.elapsed());
    });
}

#[test]
fn ureq_from_a_hundred_fibers() {
    bounded(Duration::from_secs(60), || {
        // A small fibra HTTP server (fibra's own sockets) on its own thread.
        let listener = fibra::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            fibra::run(move || {
                loop {
                    let Ok((mut conn, _)) = listener.accept() else {
                        return;
                    };
                    fibra::spawn(move || {
                        let mut req = Vec::new();
                        let mut buf = [0u8; 1024];
                        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                            match conn.read(&mut buf) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => req.extend_from_slice(&buf[..n]),
                            }
                        }
                        fibra::sleep(Duration::from_millis(100)); // a slow page
                        let body = "Hello, world!";
                        let _ = write!(
                            conn,
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    });
                }
            })
        });
        let url = format!("http://{addr}/");
        let start = Instant::now();
        fibra::run(|| {
            let fibers: Vec<_> = (0..100)
                .map(|_| {
                    let url = url.clone();
                    fibra::spawn(move || {
                        let mut resp = ureq::get(&url).call().unwrap();
                        resp.body_mut().read_to_string().unwrap()
                    })
                })
                .collect();
            for f in fibers {
                assert_eq!(f.join().unwrap(), "Hello, world!");
            }
        });
        let took = start.elapsed();
        // 100 × 100 ms one after another would be 10 s (a debug build of
        // ureq also spends milliseconds of CPU on each call, more under
        // AddressSanitizer, on a machine other tests share).
        assert!(took < Duration::from_secs(8), "took {took:?}");
    });
}
