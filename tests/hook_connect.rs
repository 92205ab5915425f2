//! Hooked `connect` parks without a thread: 10 000 fibers connect at once
//! to a listener whose accept queue is full and which accepts slowly, as
//! many as `fibra::net::TcpStream` connects, with a handful of threads.
//! And a connect that waits still ends with ECANCELED on a cancellation,
//! EINPROGRESS at its `SO_SNDTIMEO`, and goes through the blocking pool
//! where io_uring is refused (`FIBRA_NO_IO_URING=1`).
//!
//! Each measured run is a child process of its own (the threads of this
//! test binary's other tests would count otherwise), which prints one
//! line the parent reads and prints.

#![cfg(feature = "hook")]

mod util;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use util::bounded;

/// How many fibers connect at once.
const N: usize = 10_000;

/// A raw listener on loopback with `backlog`, and its address.
fn listener(backlog: i32) -> (RawFd, SocketAddr) {
    // SAFETY: a new socket, owned by the caller.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
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
    // SAFETY: valid sockaddrs of the sizes given.
    unsafe {
        assert_eq!(libc::bind(fd, (&raw const sin).cast(), len), 0);
        assert_eq!(libc::listen(fd, backlog), 0);
        assert_eq!(libc::getsockname(fd, (&raw mut bound).cast(), &mut len), 0);
    }
    let port = u16::from_be(bound.sin_port);
    (fd, SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port)))
}

/// Bounds `fd`'s blocking receives and accepts (`SO_RCVTIMEO`).
fn set_rcvtimeo(fd: RawFd, d: Duration) {
    let tv = libc::timeval {
        tv_sec: d.as_secs() as libc::time_t,
        tv_usec: d.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: a valid timeval for the socket's SO_RCVTIMEO.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const tv).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_RCVTIMEO: {}", std::io::Error::last_os_error());
}

/// Fills `addr`'s accept queue (never accepted), so that the next
/// handshake is dropped and its connect waits: the connections that fill
/// it, to keep.
fn fill_queue(addr: SocketAddr) -> Vec<TcpStream> {
    let mut fill = Vec::new();
    for _ in 0..8 {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => fill.push(s),
            Err(_) => break,
        }
    }
    fill
}

/// The soft fd limit raised to the hard one; returns it.
fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit to fill, then to set.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    lim.rlim_cur
}

/// The threads of this process now.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// The child's side: `n` fibers of one thread connect at once with
/// `design` ("hook": std's hooked connect; "net": `fibra::net`) to a
/// listener that lets its queue fill for 300 ms, then accepts in bursts
/// of 100 every 5 ms (closing each connection at once). Prints the line
/// the parent reads.
fn measure(design: &str, n: usize) {
    let (lfd, addr) = listener(128);
    // Bounds the acceptor's accept, so it sees `stop`.
    set_rcvtimeo(lfd, Duration::from_millis(100));
    let stop = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(AtomicUsize::new(0));
    // A plain thread (nothing is hooked there): the slow acceptor.
    let acceptor = {
        let (stop, accepted) = (stop.clone(), accepted.clone());
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(300)); // the queue stays full
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..100 {
                    // SAFETY: accept on our listener, no address wanted.
                    let c =
                        unsafe { libc::accept(lfd, std::ptr::null_mut(), std::ptr::null_mut()) };
                    if c < 0 {
                        break;
                    }
                    // SAFETY: the connection just accepted, closed once.
                    unsafe { libc::close(c) };
                    accepted.fetch_add(1, Ordering::Relaxed);
                }
                thread::sleep(Duration::from_millis(5));
            }
        })
    };
    // The most threads the process had while the connects ran.
    let most = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (stop, most) = (stop.clone(), most.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                most.fetch_max(threads(), Ordering::Relaxed);
                thread::sleep(Duration::from_millis(2));
            }
        })
    };
    thread::sleep(Duration::from_millis(20));
    let before = threads(); // this one, the acceptor, the sampler
    let start = Instant::now();
    let hook = design == "hook";
    let (ok, failed, first_error) = fibra::run(move || {
        let fibers: Vec<_> = (0..n)
            .map(|_| {
                fibra::spawn(move || {
                    if hook {
                        TcpStream::connect(addr).map(drop)
                    } else {
                        fibra::net::TcpStream::connect(addr).map(drop)
                    }
                })
            })
            .collect();
        let (mut ok, mut failed, mut first) = (0, 0, None);
        for f in fibers {
            match f.join().unwrap() {
                Ok(()) => ok += 1,
                Err(e) => {
                    failed += 1;
                    first.get_or_insert(e.to_string());
                }
            }
        }
        (ok, failed, first)
    });
    let wall = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    acceptor.join().unwrap();
    sampler.join().unwrap();
    let extra = most.load(Ordering::Relaxed).saturating_sub(before);
    println!(
        "RESULT design={design} n={n} ok={ok} failed={failed} wall_ms={} extra_threads={extra} \
         accepted={} first_error={first_error:?}",
        wall.as_millis(),
        accepted.load(Ordering::Relaxed),
    );
}

/// What a child measured.
#[derive(Debug)]
struct Measured {
    ok: usize,
    wall: Duration,
    extra_threads: usize,
    line: String,
}

/// Runs [`measure`] in a child process (with `env` set) and reads its line.
fn run_measure(design: &str, n: usize, env: &[(&str, &str)]) -> Measured {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "measure_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("FIBRA_CONNECT_DESIGN", design)
        .env("FIBRA_CONNECT_N", n.to_string())
        .envs(env.iter().copied())
        .output()
        .expect("cannot run the test binary as a child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.find("RESULT ").map(|at| &l[at..]))
        .unwrap_or_else(|| {
            panic!(
                "the {design} child printed no result ({:?}):\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .to_string();
    let field = |name: &str| -> usize {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    Measured {
        ok: field("ok"),
        wall: Duration::from_millis(field("wall_ms") as u64),
        extra_threads: field("extra_threads"),
        line,
    }
}

/// The child of [`ten_thousand_connects_to_a_full_queue`] (does nothing
/// in a normal run).
#[test]
fn measure_child() {
    let Ok(design) = std::env::var("FIBRA_CONNECT_DESIGN") else {
        return;
    };
    let n = std::env::var("FIBRA_CONNECT_N").unwrap().parse().unwrap();
    measure(&design, n);
}

/// 10 000 hooked connects at once, to a listener that lets its queue
/// fill and then accepts slowly, all succeed with at most a handful of
/// threads more than the process had, in about the time `fibra::net`
/// takes for the same (the kernel's SYN retries set both). Before the
/// io_uring design, each connect in flight held a pool thread (512 at
/// most); that design is measured too, on 2 000 connects, for the record.
#[test]
fn ten_thousand_connects_to_a_full_queue() {
    // Each child needs an fd per connection in flight (the listener's side
    // closes each as it accepts it).
    let limit = raise_fd_limit();
    let n = if limit >= N as u64 + 1000 {
        N
    } else {
        let n = (limit as usize).saturating_sub(1000);
        println!("the fd limit is {limit}: {n} connects instead of {N}");
        n
    };
    let hook = run_measure("hook", n, &[]);
    let net = run_measure("net", n, &[]);
    let pool = run_measure("hook", n.min(2000), &[("FIBRA_NO_IO_URING", "1")]);
    println!("hooked connect (io_uring):   {}", hook.line);
    println!("fibra::net::TcpStream:       {}", net.line);
    println!("hooked connect (pool, {}): {}", n.min(2000), pool.line);
    println!(
        "{n} connects: hook {:?} with {} threads more, fibra::net {:?} with {} more",
        hook.wall, hook.extra_threads, net.wall, net.extra_threads
    );
    assert_eq!(hook.ok, n, "{}", hook.line);
    assert_eq!(net.ok, n, "{}", net.line);
    assert_eq!(pool.ok, n.min(2000), "{}", pool.line);
    // A handful: the io_uring design needs none (a thread per connect in
    // flight would be hundreds: the pool's cap is 512).
    assert!(
        hook.extra_threads <= 8,
        "the hooked connects used {} threads: {}",
        hook.extra_threads,
        hook.line
    );
    // As fast as the kernel lets them: about fibra::net's time (generous:
    // one SYN retry more, on a noisy machine, is seconds).
    assert!(
        hook.wall <= net.wall * 3 + Duration::from_secs(10),
        "hook {:?} against fibra::net {:?}",
        hook.wall,
        net.wall
    );
}

/// A hooked connect that waits (its handshake dropped by a full queue)
/// ends with ECANCELED when its fiber is cancelled, at once, with the
/// thread's other fibers running meanwhile.
#[test]
fn a_cancel_ends_a_hooked_connect_that_waits() {
    bounded(Duration::from_secs(60), || {
        let (lfd, addr) = listener(0);
        let fill = fill_queue(addr);
        let (error, took, ticks) = fibra::run(move || {
            let ticks = Arc::new(AtomicUsize::new(0));
            let ticker = {
                let ticks = ticks.clone();
                fibra::spawn(move || {
                    loop {
                        fibra::sleep(Duration::from_millis(10));
                        ticks.fetch_add(1, Ordering::SeqCst);
                    }
                })
            };
            let error = Arc::new(std::sync::Mutex::new(None));
            let e = error.clone();
            let connecting = fibra::spawn(move || {
                let r = TcpStream::connect(addr);
                *e.lock().unwrap() = Some(r.map(drop).map_err(|e| e.raw_os_error()));
            });
            // Until the other fiber is parked in its connect, and a while.
            while ticks.load(Ordering::SeqCst) < 10 {
                fibra::sleep(Duration::from_millis(10));
            }
            let start = Instant::now();
            connecting.cancel();
            let _ = connecting.join();
            let took = start.elapsed();
            ticker.cancel();
            let error = error.lock().unwrap().take();
            (error, took, ticks.load(Ordering::SeqCst))
        });
        drop(fill);
        // SAFETY: our listener, closed once.
        unsafe { libc::close(lfd) };
        assert_eq!(error, Some(Err(Some(libc::ECANCELED))));
        assert!(took < Duration::from_secs(5), "the cancel took {took:?}");
        assert!(ticks >= 10, "the thread was blocked: {ticks} ticks");
    });
}

/// A hooked connect on a socket with `SO_SNDTIMEO` ends as the kernel's
/// does when the timeout passes: EINPROGRESS, the handshake going on (it
/// completes once the listener accepts, and the socket is then usable).
#[test]
fn a_hooked_connect_ends_at_its_send_timeout_with_einprogress() {
    bounded(Duration::from_secs(60), || {
        let (lfd, addr) = listener(0);
        let fill = fill_queue(addr);
        let SocketAddr::V4(v4) = addr else {
            unreachable!()
        };
        let (r, errno, took) = fibra::run(move || {
            // SAFETY: a new socket, owned here (closed below).
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 300_000,
            };
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            let start = Instant::now();
            // SAFETY: valid option and address of the sizes given.
            let (r, errno) = unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_SNDTIMEO,
                    (&raw const tv).cast(),
                    size_of::<libc::timeval>() as libc::socklen_t,
                );
                let r = libc::connect(
                    fd,
                    (&raw const sin).cast(),
                    size_of::<libc::sockaddr_in>() as libc::socklen_t,
                );
                (r, *libc::__errno_location())
            };
            let took = start.elapsed();
            // SAFETY: our socket, closed once.
            unsafe { libc::close(fd) };
            (r, errno, took)
        });
        drop(fill);
        // SAFETY: our listener, closed once.
        unsafe { libc::close(lfd) };
        assert_eq!((r, errno), (-1, libc::EINPROGRESS));
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(5),
            "the connect returned after {took:?}, its timeout 300 ms"
        );
    });
}

/// Where io_uring is refused, a hooked connect still parks its fiber (on
/// the blocking pool) and a hooked accept still parks until a connection
/// comes: 200 of each on one thread, in a child with `FIBRA_NO_IO_URING`.
#[test]
fn without_io_uring_connect_and_accept_still_park() {
    if std::env::var_os("FIBRA_CONNECT_DESIGN").is_some() {
        return; // (a child of the measure above)
    }
    if util::is_child("without_io_uring_connect_and_accept_still_park") {
        accept_and_connect_in_fibers(200);
        println!("CHILD OK");
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "without_io_uring_connect_and_accept_still_park",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            "FIBRA_CHILD",
            "without_io_uring_connect_and_accept_still_park",
        )
        .env("FIBRA_NO_IO_URING", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("CHILD OK"),
        "{:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The same with io_uring (where the kernel has it).
#[test]
fn two_hundred_accepts_and_connects_park_on_one_thread() {
    bounded(Duration::from_secs(60), || {
        accept_and_connect_in_fibers(200)
    });
}

/// `n` client fibers connect, one by one 1 ms apart, to a std listener
/// whose hooked accept runs in a fiber of the same thread; each client
/// reads a byte the server writes. A blocked accept or connect would hang
/// the thread (the other side could never run).
fn accept_and_connect_in_fibers(n: usize) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    fibra::run(move || {
        let server = fibra::spawn(move || {
            for _ in 0..n {
                let (mut c, _) = listener.accept().unwrap();
                std::io::Write::write_all(&mut c, b"x").unwrap();
            }
        });
        let clients: Vec<_> = (0..n)
            .map(|i| {
                fibra::spawn(move || {
                    fibra::sleep(Duration::from_millis(i as u64 % 50));
                    let mut s = TcpStream::connect(addr).unwrap();
                    let mut b = [0u8; 1];
                    s.read_exact(&mut b).unwrap();
                    assert_eq!(&b, b"x", "fd {}", s.as_raw_fd());
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        server.join().unwrap();
    });
}

extern "C" fn handled(_: libc::c_int) {}

/// Installs a handler of `sig` that does nothing, with `SA_RESTART` or not
/// (each test uses its own signal).
fn install(sig: libc::c_int, restart: bool) {
    // SAFETY: a zeroed sigaction with a handler that does nothing.
    unsafe {
        let mut a: libc::sigaction = std::mem::zeroed();
        a.sa_sigaction = handled as *const () as usize;
        a.sa_flags = if restart { libc::SA_RESTART } else { 0 };
        libc::sigemptyset(&mut a.sa_mask);
        assert_eq!(libc::sigaction(sig, &a, std::ptr::null_mut()), 0);
    }
}

/// Runs `call` in a fiber while `sig` comes to the thread 250 ms in;
/// returns its result, its errno and how long it took.
fn interrupted(sig: libc::c_int, call: impl FnOnce() -> i32 + 'static) -> (i32, i32, Duration) {
    fibra::run(move || {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() } as usize;
        let killer = thread::spawn(move || {
            thread::sleep(Duration::from_millis(250));
            // SAFETY: the runtime's thread outlives this (joined below).
            assert_eq!(unsafe { libc::pthread_kill(me as libc::pthread_t, sig) }, 0);
        });
        let start = Instant::now();
        let r = call();
        let e = std::io::Error::last_os_error().raw_os_error().unwrap();
        let took = start.elapsed();
        killer.join().unwrap();
        (r, e, took)
    })
}

/// A handler without `SA_RESTART` ends a hooked accept and a hooked
/// connect that wait, with EINTR, as it ends the kernel's.
#[test]
fn a_signal_without_sa_restart_ends_a_waiting_accept_and_connect() {
    bounded(Duration::from_secs(60), || {
        install(libc::SIGUSR1, false);
        let (lfd, _) = listener(16);
        let (r, e, took) = interrupted(libc::SIGUSR1, move || {
            // SAFETY: accept on our listener, no address wanted.
            unsafe { libc::accept(lfd, std::ptr::null_mut(), std::ptr::null_mut()) }
        });
        assert_eq!((r, e), (-1, libc::EINTR), "accept");
        assert!(took < Duration::from_secs(5), "{took:?}");
        // SAFETY: our listener, closed once.
        unsafe { libc::close(lfd) };

        let (lfd, addr) = listener(0);
        let fill = fill_queue(addr);
        let (r, e, _) = interrupted(libc::SIGUSR1, move || {
            let fd = tcp_socket();
            let r = connect_raw(fd, addr);
            // (std's `TcpStream::connect` would retry after EINTR: see
            // the test below.)
            let e = std::io::Error::last_os_error();
            // SAFETY: our socket, closed once.
            unsafe { libc::close(fd) };
            set_errno(e.raw_os_error().unwrap());
            r
        });
        assert_eq!((r, e), (-1, libc::EINTR), "connect");
        drop(fill);
        // SAFETY: our listener, closed once.
        unsafe { libc::close(lfd) };
    });
}

/// With `SA_RESTART` a hooked accept goes on waiting after the handler
/// and takes the connection that comes later.
#[test]
fn after_an_sa_restart_handler_accept_goes_on_waiting() {
    bounded(Duration::from_secs(60), || {
        install(libc::SIGUSR2, true);
        let (lfd, addr) = listener(16);
        let client = thread::spawn(move || {
            thread::sleep(Duration::from_millis(400));
            TcpStream::connect(addr).unwrap()
        });
        let (r, _, took) = interrupted(libc::SIGUSR2, move || {
            // SAFETY: accept on our listener, no address wanted.
            unsafe { libc::accept(lfd, std::ptr::null_mut(), std::ptr::null_mut()) }
        });
        assert!(r >= 0, "accept failed: {}", std::io::Error::last_os_error());
        assert!(took >= Duration::from_millis(300), "{took:?}");
        let _c = client.join().unwrap();
        // SAFETY: the accepted connection and our listener, closed once.
        unsafe {
            libc::close(r);
            libc::close(lfd);
        }
    });
}

/// A fiber and a plain thread accept on one listener, 20 connections one
/// at a time. Whenever the thread takes the connection, the fiber's accept
/// goes on waiting, parked, and its `fibra::timeout` ends it (a blocked
/// thread could not run the next round). Where io_uring is refused the
/// hook accepts once the listener is readable, and a race lost in between
/// blocks the thread until the next connection; that window (between a
/// poll and an accept) is too narrow for this test to hit reliably, so it
/// checks the io_uring design's behaviour, not that old hole.
#[test]
fn an_accept_raced_by_another_thread_stays_parked() {
    bounded(Duration::from_secs(120), || {
        let (lfd, addr) = listener(16);
        let stop = Arc::new(AtomicBool::new(false));
        let taken = Arc::new(AtomicUsize::new(0));
        // The plain thread: a blocking accept, ready before each connect.
        let thief = {
            let (stop, taken) = (stop.clone(), taken.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    // SAFETY: accept on our listener, no address wanted.
                    let c =
                        unsafe { libc::accept(lfd, std::ptr::null_mut(), std::ptr::null_mut()) };
                    if c >= 0 {
                        taken.fetch_add(1, Ordering::SeqCst);
                        // SAFETY: the connection just accepted, closed once.
                        unsafe { libc::close(c) };
                    }
                }
            })
        };
        let (by_fiber, rounds) = fibra::run(move || {
            let mut by_fiber = 0;
            let rounds = 20;
            for _ in 0..rounds {
                let accepting = fibra::spawn(move || {
                    fibra::timeout(Duration::from_millis(200), || {
                        // SAFETY: accept on our listener, no address wanted.
                        unsafe { libc::accept(lfd, std::ptr::null_mut(), std::ptr::null_mut()) }
                    })
                });
                fibra::sleep(Duration::from_millis(20)); // both wait now
                let _c = TcpStream::connect(addr).unwrap();
                match accepting.join().unwrap() {
                    Ok(c) if c >= 0 => {
                        by_fiber += 1;
                        // SAFETY: the connection accepted, closed once.
                        unsafe { libc::close(c) };
                    }
                    Ok(_) => {
                        let e = std::io::Error::last_os_error();
                        assert_eq!(e.raw_os_error(), Some(libc::ETIMEDOUT), "{e}");
                    }
                    Err(_) => {} // the timeout unwound a later park
                }
            }
            (by_fiber, rounds)
        });
        stop.store(true, Ordering::SeqCst);
        // Wakes the thief for the last time.
        let _last = TcpStream::connect(addr).unwrap();
        thief.join().unwrap();
        // SAFETY: our listener, closed once.
        unsafe { libc::close(lfd) };
        let taken = taken.load(Ordering::SeqCst);
        println!("of {rounds} connections the fiber took {by_fiber}, the thread the rest");
        assert!(taken >= rounds - by_fiber, "{taken} {by_fiber}");
    });
}

/// A new blocking TCP socket.
fn tcp_socket() -> RawFd {
    // SAFETY: a new socket, owned by the caller.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    fd
}

/// connect(2) of `fd` to IPv4 `addr`.
fn connect_raw(fd: RawFd, addr: SocketAddr) -> i32 {
    let SocketAddr::V4(v4) = addr else {
        unreachable!("loopback IPv4")
    };
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*v4.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: a valid address of the size given.
    unsafe {
        libc::connect(
            fd,
            (&raw const sin).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    }
}

fn set_errno(e: i32) {
    // SAFETY: this thread's errno.
    unsafe { *libc::__errno_location() = e };
}

/// A connect ended by a signal leaves its handshake going; a second
/// connect of the socket (std's `TcpStream::connect` makes one after
/// EINTR) waits for the handshake's end and returns 0, as the kernel's
/// blocking connect does, in a fiber as on a plain thread.
#[test]
fn a_connect_retried_after_eintr_waits_for_its_handshake() {
    bounded(Duration::from_secs(60), || {
        install(libc::SIGWINCH, false);
        let in_thread = retried_connect(false);
        let in_fiber = retried_connect(true);
        assert_eq!(in_thread, ((-1, libc::EINTR), (0, 0)), "on a plain thread");
        assert_eq!(in_fiber, in_thread, "in a fiber");
    });
}

/// A connect to a full queue, interrupted by SIGWINCH 100 ms in, then the
/// queue emptied and the connect made again: each one's result and errno.
fn retried_connect(in_fiber: bool) -> ((i32, i32), (i32, i32)) {
    let (lfd, addr) = listener(0);
    let fill = fill_queue(addr);
    let attempts = move || {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() } as usize;
        let killer = thread::spawn(move || {
            thread::sleep(Duration::from_millis(250));
            // SAFETY: the thread outlives this (joined below).
            unsafe { libc::pthread_kill(me as libc::pthread_t, libc::SIGWINCH) };
        });
        let fd = tcp_socket();
        set_errno(0);
        let first = connect_raw(fd, addr);
        let first = (
            first,
            std::io::Error::last_os_error().raw_os_error().unwrap(),
        );
        killer.join().unwrap();
        // The queue empties: the handshake's next SYN gets in.
        let acceptor = thread::spawn(move || {
            drop(fill);
            for _ in 0..16 {
                // SAFETY: accept on our listener, no address wanted.
                let c = unsafe { libc::accept(lfd, std::ptr::null_mut(), std::ptr::null_mut()) };
                if c < 0 {
                    break;
                }
                // SAFETY: the connection just accepted, closed once.
                unsafe { libc::close(c) };
            }
        });
        set_errno(0);
        let second = connect_raw(fd, addr);
        let second = (
            second,
            std::io::Error::last_os_error().raw_os_error().unwrap(),
        );
        // SAFETY: our socket, closed once.
        unsafe { libc::close(fd) };
        (first, second, acceptor)
    };
    // Bounds the acceptor's accepts.
    set_rcvtimeo(lfd, Duration::from_secs(3));
    let (first, second, acceptor) = if in_fiber {
        fibra::run(attempts)
    } else {
        attempts()
    };
    acceptor.join().unwrap();
    // SAFETY: our listener, closed once.
    unsafe { libc::close(lfd) };
    (first, second)
}

/// While a hooked connect waits, the kernel finishing it never interrupts
/// the thread as a signal would: a raw (unhooked) `epoll_wait` made on the
/// runtime's thread meanwhile runs its whole timeout. (By default io_uring
/// finishes such a call in the thread by flagging it as if a signal were
/// pending, and that wait failed with EINTR when the handshake ended, as
/// an outer event loop's wait on the thread would.)
#[test]
fn a_completing_connect_sends_no_eintr_to_the_thread() {
    if !kernel_at_least(6, 1) {
        println!("SKIPPED: the kernel has no IORING_SETUP_DEFER_TASKRUN (Linux 6.1)");
        return;
    }
    bounded(Duration::from_secs(60), || {
        let (lfd, addr) = listener(0);
        let fill = fill_queue(addr);
        set_rcvtimeo(lfd, Duration::from_secs(5));
        // Empties the queue 100 ms in: the handshake's SYN, sent again
        // about a second in, gets through then.
        let acceptor = thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            drop(fill);
            let mut accepted = 0;
            while accepted < 16 {
                // SAFETY: accept on our listener, no address wanted.
                let c = unsafe { libc::accept(lfd, std::ptr::null_mut(), std::ptr::null_mut()) };
                if c < 0 {
                    break;
                }
                accepted += 1;
                // SAFETY: the connection just accepted, closed once.
                unsafe { libc::close(c) };
            }
        });
        // (No stall sampling: its signal would end the raw wait too.)
        let rt = fibra::Runtime::builder()
            .stall_stacks(false)
            .build()
            .unwrap();
        let (r, errno, took, connected) = rt.block_on(move || {
            let connecting = fibra::spawn(move || TcpStream::connect(addr).map(drop));
            fibra::yield_now(); // it submits its connect and parks
            // SAFETY: a new epoll instance, closed below.
            let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 1];
            let start = Instant::now();
            // SAFETY: a raw system call (not hooked) with a valid buffer of
            // one event.
            let r = unsafe { libc::syscall(libc::SYS_epoll_wait, ep, ev.as_mut_ptr(), 1, 2500) };
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap();
            let took = start.elapsed();
            // SAFETY: our epoll fd, closed once.
            unsafe { libc::close(ep) };
            (r, errno, took, connecting.join().unwrap())
        });
        acceptor.join().unwrap();
        // SAFETY: our listener, closed once.
        unsafe { libc::close(lfd) };
        assert!(connected.is_ok(), "{connected:?}");
        assert_eq!(
            r, 0,
            "the raw epoll_wait failed after {took:?}: errno {errno}"
        );
        assert!(took >= Duration::from_millis(2000), "{took:?}");
    });
}

/// Whether the running kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}
