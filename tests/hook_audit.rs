//! The six holes an outside audit found in the `hook` feature (issue 49),
//! each as the proof of concept that broke it: every test here failed
//! before its fix.
#![cfg(feature = "hook")]

mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use libc::c_int;

use util::bounded;

/// A connected TCP pair on loopback: (client, server).
fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    (c, s)
}

fn set_rcvtimeo(fd: c_int, d: Duration) {
    let tv = libc::timeval {
        tv_sec: d.as_secs() as libc::time_t,
        tv_usec: d.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: `tv` is a valid timeval of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const tv).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
}

// ---- Hole 1: one id space for every socket registration -----------------

/// A std socket registered by a hooked call and closed on another thread
/// leaves a stale source in the runtime's reactor; a `fibra::net` socket
/// that reuses its fd number must not be matched to it. Before the fix the
/// hook's ids and `fibra::net`'s were two counters from 1: in a fresh
/// process the first of each collided, and the read below timed out
/// though its data came. (A child process, so both counters start fresh.)
#[test]
fn a_fibra_socket_never_takes_a_closed_hooked_socket_s_stale_source() {
    const NAME: &str = "a_fibra_socket_never_takes_a_closed_hooked_socket_s_stale_source";
    if !util::is_child(NAME) {
        util::assert_child_ok(NAME);
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // A plain thread (no runtime, nothing hooked) accepts every connection
    // and writes one byte to it a little after it came, keeping it open.
    thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            let mut s = s.unwrap();
            thread::sleep(Duration::from_millis(50));
            s.write_all(b"!").unwrap();
            held.push(s);
        }
    });
    fibra::run(move || {
        // Each attempt makes one socket of each kind, so the two counters
        // of before the fix stayed in step: the n-th hooked socket and the
        // n-th fibra socket had the same id. An attempt counts when the
        // fibra socket got the hooked one's fd number (something else of
        // the process may take it first: try again).
        for _attempt in 0..10 {
            // A socket the hooks see, registered in this runtime's reactor
            // by a read that parks.
            let mut hooked = TcpStream::connect(addr).unwrap();
            let mut one = [0u8; 1];
            hooked.read_exact(&mut one).unwrap();
            let number = hooked.as_raw_fd();
            // Closed on another thread: the reactor here is not told.
            thread::spawn(move || drop(hooked)).join().unwrap();
            let mut stream = fibra::net::TcpStream::connect(addr).unwrap();
            if stream.as_raw_fd() != number {
                continue;
            }
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let got = stream.read_exact(&mut one);
            assert!(got.is_ok(), "the data came but the read said {got:?}");
            return;
        }
        panic!("the fd number was never reused");
    });
    println!("CHILD OK");
}

// ---- Hole 2: nothing in a signal handler touches the scheduler ----------

/// Set while a handler of this file runs; a fiber that runs then has been
/// switched to from inside the handler.
static IN_HANDLER: AtomicBool = AtomicBool::new(false);
/// Fibers that ran while a handler was running.
static RAN_IN_HANDLER: AtomicUsize = AtomicUsize::new(0);
/// The fd the handlers write to or read from.
static HANDLER_FD: AtomicUsize = AtomicUsize::new(0);
/// What the blocking handler's call returned, and its errno.
static HANDLER_RESULT: AtomicUsize = AtomicUsize::new(0);
/// Held by each test that uses the statics above: two at once would count
/// each other's handler windows and swap each other's fd.
static HANDLER_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn install(sig: c_int, handler: extern "C" fn(c_int)) {
    // SAFETY: a zeroed sigaction with a plain handler of the one-argument
    // form, which only uses atomics and async-signal-safe calls.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as *const () as usize;
        action.sa_flags = libc::SA_RESTART;
        assert_eq!(libc::sigaction(sig, &action, std::ptr::null_mut()), 0);
    }
}

/// A fiber that counts itself if it runs inside a handler, until `stop`.
fn watcher(stop: Arc<AtomicBool>) -> fibra::JoinHandle<()> {
    fibra::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            if IN_HANDLER.load(Ordering::SeqCst) {
                RAN_IN_HANDLER.fetch_add(1, Ordering::SeqCst);
            }
            fibra::yield_now();
        }
    })
}

extern "C" fn write_one_byte(_: c_int) {
    IN_HANDLER.store(true, Ordering::SeqCst);
    let fd = HANDLER_FD.load(Ordering::SeqCst) as c_int;
    // SAFETY: one byte of a static buffer; write(2) is async-signal-safe.
    unsafe { libc::write(fd, b"!".as_ptr().cast(), 1) };
    IN_HANDLER.store(false, Ordering::SeqCst);
}

/// The self-pipe trick, on a non-blocking socket, 300 times in a row from
/// a fiber that does not park in between: before the fix every hooked
/// call spent the fiber's I/O budget, and the 129th yielded — other fibers
/// ran inside the signal handler (and it borrowed the scheduler's state
/// while the interrupted code might hold it).
#[test]
fn a_signal_handler_s_nonblocking_writes_never_switch_fibers() {
    let _one = HANDLER_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    bounded(Duration::from_secs(30), || {
        let (a, mut b) = tcp_pair();
        a.set_nonblocking(true).unwrap();
        HANDLER_FD.store(a.as_raw_fd() as usize, Ordering::SeqCst);
        install(libc::SIGUSR1, write_one_byte);
        fibra::run(move || {
            let stop = Arc::new(AtomicBool::new(false));
            let w = watcher(stop.clone());
            fibra::yield_now(); // the watcher is running
            for _ in 0..300 {
                // SAFETY: raise(3) delivers the signal to this thread
                // before it returns.
                assert_eq!(unsafe { libc::raise(libc::SIGUSR1) }, 0);
            }
            stop.store(true, Ordering::SeqCst);
            w.join().unwrap();
        });
        let mut got = vec![0u8; 300];
        b.read_exact(&mut got).unwrap();
        assert!(got.iter().all(|&c| c == b'!'));
    });
    assert_eq!(
        RAN_IN_HANDLER.load(Ordering::SeqCst),
        0,
        "fibers ran inside the signal handler"
    );
}

extern "C" fn blocking_read(_: c_int) {
    IN_HANDLER.store(true, Ordering::SeqCst);
    let fd = HANDLER_FD.load(Ordering::SeqCst) as c_int;
    let mut byte = 0u8;
    // SAFETY: one byte of a local; read(2) is async-signal-safe.
    let r = unsafe { libc::read(fd, (&raw mut byte).cast(), 1) };
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    HANDLER_RESULT.store(
        ((r as isize as usize) << 16) | errno as usize,
        Ordering::SeqCst,
    );
    IN_HANDLER.store(false, Ordering::SeqCst);
}

/// A blocking read in a signal handler, on a blocking socket with no data
/// and a 100 ms `SO_RCVTIMEO`, blocks the thread as the kernel's would and
/// then says `EAGAIN`: it does not park the fiber from inside the handler.
#[test]
fn a_blocking_call_in_a_signal_handler_blocks_the_thread_instead_of_parking() {
    let _one = HANDLER_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    bounded(Duration::from_secs(30), || {
        let (a, _b) = tcp_pair();
        set_rcvtimeo(a.as_raw_fd(), Duration::from_millis(100));
        HANDLER_FD.store(a.as_raw_fd() as usize, Ordering::SeqCst);
        install(libc::SIGUSR2, blocking_read);
        fibra::run(move || {
            let stop = Arc::new(AtomicBool::new(false));
            let w = watcher(stop.clone());
            fibra::yield_now();
            let start = Instant::now();
            // SAFETY: as above.
            assert_eq!(unsafe { libc::raise(libc::SIGUSR2) }, 0);
            assert!(start.elapsed() >= Duration::from_millis(90));
            stop.store(true, Ordering::SeqCst);
            w.join().unwrap();
            drop(a);
        });
    });
    let result = HANDLER_RESULT.load(Ordering::SeqCst);
    assert_eq!(result >> 16, usize::MAX >> 16, "the read returned -1");
    assert_eq!(result & 0xffff, libc::EAGAIN as usize);
    assert_eq!(
        RAN_IN_HANDLER.load(Ordering::SeqCst),
        0,
        "the handler's read parked: fibers ran inside it"
    );
}

/// `sigaction`'s old action reports the handler the user installed, not
/// the hook's wrapper, so code that saves and restores an action gets
/// back what it gave.
#[test]
fn sigaction_reports_the_user_s_handler() {
    extern "C" fn nothing(_: c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {}
    // SAFETY: zeroed sigactions; the handler does nothing.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = nothing as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO;
        assert_eq!(
            libc::sigaction(libc::SIGWINCH, &action, std::ptr::null_mut()),
            0
        );
        let mut old: libc::sigaction = std::mem::zeroed();
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        assert_eq!(libc::sigaction(libc::SIGWINCH, &dfl, &mut old), 0);
        assert_eq!(old.sa_sigaction, nothing as *const () as usize);
        assert_ne!(old.sa_flags & libc::SA_SIGINFO, 0);
        assert_eq!(
            libc::sigaction(libc::SIGWINCH, std::ptr::null(), &mut old),
            0
        );
        assert_eq!(old.sa_sigaction, libc::SIG_DFL);
    }
}

// ---- Hole 3: poll for POLLPRI alone --------------------------------------

/// TCP urgent data raises only `POLLPRI`; a hooked `poll` for it alone
/// must wake. Before the fix the fd was watched as readable, which epoll
/// does not report for urgent data alone: the poll slept to its timeout.
#[test]
fn poll_for_pollpri_alone_sees_urgent_data() {
    bounded(Duration::from_secs(30), || {
        let (client, server) = tcp_pair();
        let sender = thread::spawn(move || {
            thread::sleep(Duration::from_millis(50));
            // SAFETY: one byte of a static buffer.
            let r =
                unsafe { libc::send(client.as_raw_fd(), b"!".as_ptr().cast(), 1, libc::MSG_OOB) };
            assert_eq!(r, 1);
            client // kept open: its close would wake the poll as well
        });
        let (r, revents, took) = fibra::run(move || {
            let mut pfd = libc::pollfd {
                fd: server.as_raw_fd(),
                events: libc::POLLPRI,
                revents: 0,
            };
            let start = Instant::now();
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, 10_000) };
            (r, pfd.revents, start.elapsed())
        });
        let client = sender.join().unwrap();
        assert_eq!(r, 1, "poll returned {r} after {took:?}");
        assert_ne!(revents & libc::POLLPRI, 0);
        assert!(took < Duration::from_secs(5), "poll took {took:?}");
        drop(client);
    });
}

// ---- Holes 4 and 5: recv with MSG_WAITALL --------------------------------

/// `recv(MSG_PEEK | MSG_WAITALL)` waits until the whole buffer can be
/// peeked, and peeks the stream's start: "abcdef". Before the fix the
/// loop peeked the start again into the rest of the buffer: "abcabc".
#[test]
fn recv_peek_waitall_peeks_the_whole_stream() {
    bounded(Duration::from_secs(30), || {
        let (mut client, server) = tcp_pair();
        let sender = thread::spawn(move || {
            client.write_all(b"abc").unwrap();
            thread::sleep(Duration::from_millis(50));
            client.write_all(b"def").unwrap();
            thread::sleep(Duration::from_millis(300));
        });
        let (peeked, read) = fibra::run(move || {
            let mut buf = [0u8; 6];
            // SAFETY: `buf` is valid for 6 bytes.
            let r = unsafe {
                libc::recv(
                    server.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    6,
                    libc::MSG_PEEK | libc::MSG_WAITALL,
                )
            };
            assert_eq!(r, 6);
            let peeked = buf;
            let mut again = [0u8; 6];
            (&server).read_exact(&mut again).unwrap();
            (peeked, again)
        });
        sender.join().unwrap();
        assert_eq!(&peeked, b"abcdef");
        assert_eq!(&read, b"abcdef", "the peek consumed nothing");
    });
}

/// `recv(MSG_WAITALL)` on a datagram socket returns one datagram, as the
/// kernel's does. Before the fix it glued datagrams together, waiting for
/// the whole buffer to fill.
#[test]
fn recv_waitall_on_a_datagram_socket_returns_one_datagram() {
    bounded(Duration::from_secs(30), || {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        set_rcvtimeo(rx.as_raw_fd(), Duration::from_secs(3));
        let sender = thread::spawn(move || {
            thread::sleep(Duration::from_millis(50));
            tx.send(b"ab").unwrap();
            tx.send(b"cd").unwrap();
        });
        let (r, buf) = fibra::run(move || {
            let mut buf = [0u8; 64];
            // SAFETY: `buf` is valid for 64 bytes.
            let r = unsafe {
                libc::recv(
                    rx.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    64,
                    libc::MSG_WAITALL,
                )
            };
            (r, buf)
        });
        sender.join().unwrap();
        assert_eq!(r, 2);
        assert_eq!(&buf[..2], b"ab");
    });
}

// ---- Hole 6: accept and connect never flip a shared O_NONBLOCK -----------

/// A plain thread that reads `fd`'s file status flags in a loop until
/// `stop`, and returns how often it saw `O_NONBLOCK`.
fn nonblocking_watcher(fd: c_int, stop: Arc<AtomicBool>) -> thread::JoinHandle<usize> {
    thread::spawn(move || {
        let mut seen = 0usize;
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: F_GETFL reads no memory.
            let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
            if fl >= 0 && fl & libc::O_NONBLOCK != 0 {
                seen += 1;
            }
        }
        seen
    })
}

/// A fiber accepts on a listener while a plain thread accepts on a
/// `try_clone` of it (the same open file description) and a third thread
/// watches the description's flags. Before the fix every hooked accept
/// made the description `O_NONBLOCK` for its system call: the watcher saw
/// it, and the plain thread's blocking accept could say `WouldBlock`.
#[test]
fn a_hooked_accept_never_makes_a_shared_listener_nonblocking() {
    const CONNECTIONS: usize = 200;
    bounded(Duration::from_secs(60), || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // Both accepts end by themselves once the clients are done.
        set_rcvtimeo(listener.as_raw_fd(), Duration::from_millis(300));
        let clone = listener.try_clone().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));

        let watcher = nonblocking_watcher(clone.as_raw_fd(), stop.clone());
        let plain = {
            let (accepted, stop) = (accepted.clone(), stop.clone());
            thread::spawn(move || {
                let mut instant_would_block = 0;
                while !stop.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    match clone.accept() {
                        Ok(_) => {
                            accepted.fetch_add(1, Ordering::SeqCst);
                        }
                        // SO_RCVTIMEO: a real timeout takes 300 ms; one at
                        // once is the flag someone else set.
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            if start.elapsed() < Duration::from_millis(150) {
                                instant_would_block += 1;
                            }
                        }
                        Err(e) => panic!("the plain thread's accept: {e}"),
                    }
                }
                instant_would_block
            })
        };
        let clients = thread::spawn(move || {
            for _ in 0..CONNECTIONS {
                let c = TcpStream::connect(addr).unwrap();
                drop(c);
                thread::sleep(Duration::from_micros(200));
            }
        });
        {
            let (accepted, stop) = (accepted.clone(), stop.clone());
            fibra::run(move || {
                let ticker = fibra::spawn(|| {
                    for _ in 0..20 {
                        fibra::sleep(Duration::from_millis(5));
                    }
                });
                while accepted.load(Ordering::SeqCst) < CONNECTIONS {
                    match listener.accept() {
                        Ok(_) => {
                            accepted.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        Err(e) => panic!("the fiber's accept: {e}"),
                    }
                }
                ticker.join().unwrap();
                stop.store(true, Ordering::SeqCst);
            });
        }
        clients.join().unwrap();
        let instant = plain.join().unwrap();
        let seen = watcher.join().unwrap();
        assert_eq!(seen, 0, "the listener was seen O_NONBLOCK {seen} times");
        assert_eq!(
            instant, 0,
            "the plain thread's blocking accept said WouldBlock at once"
        );
        assert_eq!(accepted.load(Ordering::SeqCst), CONNECTIONS);
    });
}

/// A hooked connect leaves the socket's flags alone: a thread watching
/// them across 200 connects never sees `O_NONBLOCK`. Before the fix each
/// connect set it for its system call.
#[test]
fn a_hooked_connect_never_makes_the_socket_nonblocking() {
    bounded(Duration::from_secs(60), || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = thread::spawn(move || {
            for _ in 0..200 {
                drop(listener.accept().unwrap());
            }
        });
        let seen = fibra::run(move || {
            let mut seen = 0;
            for _ in 0..200 {
                // SAFETY: a new socket, closed below.
                let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
                assert!(fd >= 0);
                let stop = Arc::new(AtomicBool::new(false));
                let watcher = nonblocking_watcher(fd, stop.clone());
                thread::sleep(Duration::from_micros(100)); // the watcher runs
                let sin = match addr {
                    std::net::SocketAddr::V4(a) => libc::sockaddr_in {
                        sin_family: libc::AF_INET as libc::sa_family_t,
                        sin_port: a.port().to_be(),
                        sin_addr: libc::in_addr {
                            s_addr: u32::from(*a.ip()).to_be(),
                        },
                        sin_zero: [0; 8],
                    },
                    _ => unreachable!(),
                };
                // SAFETY: a valid sockaddr_in of the size given.
                let r = unsafe {
                    libc::connect(
                        fd,
                        (&raw const sin).cast(),
                        size_of::<libc::sockaddr_in>() as libc::socklen_t,
                    )
                };
                assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
                stop.store(true, Ordering::Relaxed);
                seen += watcher.join().unwrap();
                // SAFETY: our socket, closed once.
                unsafe { libc::close(fd) };
            }
            seen
        });
        acceptor.join().unwrap();
        assert_eq!(seen, 0, "the socket was seen O_NONBLOCK {seen} times");
    });
}

/// A `fibra::timeout` that lands while a hooked connect waits (a listener
/// whose queue is full drops the handshake) makes the connect fail with
/// `ETIMEDOUT` at once, and the thread's other fibers ran meanwhile.
#[test]
fn a_timeout_ends_a_hooked_connect_that_waits() {
    bounded(Duration::from_secs(60), || {
        // SAFETY: a new socket, kept to the end of the test.
        let lfd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        assert!(lfd >= 0);
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        };
        let mut bound = sin;
        let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: valid sockaddrs of the sizes given; backlog 0.
        unsafe {
            assert_eq!(libc::bind(lfd, (&raw const sin).cast(), len), 0);
            assert_eq!(libc::listen(lfd, 0), 0);
            assert_eq!(libc::getsockname(lfd, (&raw mut bound).cast(), &mut len), 0);
        }
        let addr = std::net::SocketAddr::from((
            std::net::Ipv4Addr::LOCALHOST,
            u16::from_be(bound.sin_port),
        ));
        // Fill the accept queue (never accepted), so the next handshake is
        // dropped and its connect waits.
        let mut fill = Vec::new();
        for _ in 0..4 {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(s) => fill.push(s),
                Err(_) => break,
            }
        }
        let (result, took, ticks) = fibra::run(move || {
            let ticks = Arc::new(AtomicUsize::new(0));
            let t = {
                let ticks = ticks.clone();
                fibra::spawn(move || {
                    for _ in 0..20 {
                        fibra::sleep(Duration::from_millis(10));
                        ticks.fetch_add(1, Ordering::SeqCst);
                    }
                })
            };
            let start = Instant::now();
            let result = fibra::timeout(Duration::from_millis(300), || TcpStream::connect(addr));
            let took = start.elapsed();
            let ticks_then = ticks.load(Ordering::SeqCst);
            t.join().unwrap();
            (result.map(|r| r.map(drop)), took, ticks_then)
        });
        drop(fill);
        // SAFETY: our listener, closed once.
        unsafe { libc::close(lfd) };
        match result {
            Ok(Err(e)) => assert_eq!(e.raw_os_error(), Some(libc::ETIMEDOUT), "{e}"),
            Err(_) => {} // the timeout unwound a later park: also fine
            Ok(Ok(())) => panic!("the connect to a full queue succeeded"),
        }
        assert!(took < Duration::from_secs(5), "the connect took {took:?}");
        assert!(
            ticks >= 5,
            "the ticker ticked {ticks} times: the thread was blocked"
        );
    });
}
