//! Signals as the kernel delivers them, to calls parked in hooks (issue
//! 61, finding 6): a signal handler that runs while a fiber is parked in a
//! hooked call ends that call as it would end the kernel's. `select`,
//! `poll`, `epoll_wait` and the sleeps fail with `EINTR` (a sleep says
//! what was left); a socket or pipe call fails with `EINTR` when the
//! handler lacks `SA_RESTART` (or `siginterrupt` said so), and goes on
//! waiting when it has it; a signal the thread blocks interrupts nothing.
//! Before, every one of these waited its whole timeout, and a `recv`
//! never returned.
#![cfg(feature = "hook")]

mod util;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use libc::c_int;

unsafe extern "C" {
    /// glibc's (the `libc` crate leaves it out); the hook's with the feature.
    fn siginterrupt(sig: c_int, flag: c_int) -> c_int;
}

static HANDLED: AtomicUsize = AtomicUsize::new(0);

extern "C" fn count(_: c_int) {
    HANDLED.fetch_add(1, Ordering::SeqCst);
}

/// The handler of `sig`, with `SA_RESTART` or not (each test uses its
/// signal with one disposition, so tests running at once agree).
fn install(sig: c_int, restart: bool) {
    // SAFETY: a zeroed sigaction with a plain handler that only counts.
    unsafe {
        let mut a: libc::sigaction = std::mem::zeroed();
        a.sa_sigaction = count as *const () as usize;
        a.sa_flags = if restart { libc::SA_RESTART } else { 0 };
        libc::sigemptyset(&mut a.sa_mask);
        assert_eq!(libc::sigaction(sig, &a, std::ptr::null_mut()), 0);
    }
}

/// Sends `sig` to thread `to` after `after`.
fn kill_later(to: libc::pthread_t, sig: c_int, after: Duration) -> thread::JoinHandle<()> {
    let to = to as usize;
    thread::spawn(move || {
        thread::sleep(after);
        // SAFETY: the runtime's thread outlives this (the test joins us
        // before it ends).
        assert_eq!(unsafe { libc::pthread_kill(to as libc::pthread_t, sig) }, 0);
    })
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

fn pipe() -> (c_int, c_int) {
    let mut fds = [0; 2];
    // SAFETY: a valid array for two fds.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    (fds[0], fds[1])
}

/// Runs `call` in a fiber (beside a ticker fiber, so the thread is seen
/// to keep running others) while `sig` comes 250 ms in; returns what it
/// returned, its errno and how long it took.
fn interrupted(sig: c_int, call: impl FnOnce() -> isize + 'static) -> (isize, c_int, Duration) {
    fibra::run(move || {
        let ticker = fibra::spawn(|| {
            for _ in 0..5 {
                fibra::sleep(Duration::from_millis(10));
            }
        });
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() };
        let killer = kill_later(me, sig, Duration::from_millis(250));
        let start = Instant::now();
        let r = call();
        let e = errno();
        let took = start.elapsed();
        killer.join().unwrap();
        ticker.join().unwrap();
        (r, e, took)
    })
}

/// A call to make in a fiber: what it returns.
type Call = Box<dyn FnOnce() -> isize>;

/// The waits that fail with `EINTR` whatever the handler's flags.
#[test]
fn select_poll_epoll_and_sleep_fail_with_eintr() {
    for (sig, restart) in [(libc::SIGUSR1, false), (libc::SIGUSR2, true)] {
        install(sig, restart);
        let (r, _w) = pipe();
        let calls: Vec<(&str, Call)> = vec![
            (
                "poll",
                Box::new(move || {
                    let mut p = libc::pollfd {
                        fd: r,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd.
                    unsafe { libc::poll(&mut p, 1, 5000) as isize }
                }),
            ),
            (
                "select",
                Box::new(move || {
                    // SAFETY: a zeroed set, our fd below FD_SETSIZE.
                    unsafe {
                        let mut set: libc::fd_set = std::mem::zeroed();
                        libc::FD_SET(r, &mut set);
                        let mut tv = libc::timeval {
                            tv_sec: 5,
                            tv_usec: 0,
                        };
                        let n = libc::select(
                            r + 1,
                            &mut set,
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                            &mut tv,
                        );
                        // The set is left as it was; the time left written.
                        assert!(libc::FD_ISSET(r, &set), "select's set changed on EINTR");
                        assert!(tv.tv_sec >= 3, "select's time left: {}", tv.tv_sec);
                        n as isize
                    }
                }),
            ),
            (
                "epoll_wait",
                Box::new(move || {
                    // SAFETY: our own epoll fd, a valid event.
                    unsafe {
                        let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
                        let mut ev = libc::epoll_event {
                            events: libc::EPOLLIN as u32,
                            u64: 0,
                        };
                        libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, r, &mut ev);
                        let n = libc::epoll_wait(ep, &mut ev, 1, 5000);
                        let e = errno();
                        libc::close(ep);
                        *libc::__errno_location() = e;
                        n as isize
                    }
                }),
            ),
            (
                "nanosleep",
                Box::new(|| {
                    let req = libc::timespec {
                        tv_sec: 5,
                        tv_nsec: 0,
                    };
                    let mut rem = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    };
                    // SAFETY: valid timespecs.
                    let n = unsafe { libc::nanosleep(&req, &mut rem) };
                    let e = errno();
                    assert!(rem.tv_sec >= 3, "nanosleep's time left: {}", rem.tv_sec);
                    // SAFETY: this thread's errno.
                    unsafe { *libc::__errno_location() = e };
                    n as isize
                }),
            ),
        ];
        for (name, call) in calls {
            let before = HANDLED.load(Ordering::SeqCst);
            let (n, e, took) = interrupted(sig, call);
            assert_eq!((n, e), (-1, libc::EINTR), "{name}, SA_RESTART {restart}");
            assert!(took < Duration::from_secs(3), "{name} took {took:?}");
            assert!(
                HANDLED.load(Ordering::SeqCst) > before,
                "{name}: the handler ran"
            );
        }
    }
}

fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    (c, s)
}

/// A blocking `recv` and a pipe `read`: `EINTR` from a handler without
/// `SA_RESTART`.
#[test]
fn socket_and_pipe_calls_fail_with_eintr_without_sa_restart() {
    install(libc::SIGUSR1, false);
    let (c, _s) = tcp_pair();
    let fd = c.as_raw_fd();
    let (n, e, took) = interrupted(libc::SIGUSR1, move || {
        let mut buf = [0u8; 16];
        // SAFETY: a valid buffer.
        unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) }
    });
    assert_eq!((n, e), (-1, libc::EINTR), "recv");
    assert!(took < Duration::from_secs(3));
    // std's `read` gives the error kind (its `read_exact` retries).
    let (r, _w) = pipe();
    let (n, e, _) = interrupted(libc::SIGUSR1, move || {
        let mut buf = [0u8; 16];
        // SAFETY: a valid buffer.
        unsafe { libc::read(r, buf.as_mut_ptr().cast(), buf.len()) }
    });
    assert_eq!((n, e), (-1, libc::EINTR), "pipe read");
}

/// With `SA_RESTART` the call goes on waiting after the handler, and
/// returns the data that comes later; with a socket timeout it fails with
/// `EINTR` all the same (signal(7)).
#[test]
fn socket_calls_restart_after_an_sa_restart_handler() {
    install(libc::SIGUSR2, true);
    let (c, mut s) = tcp_pair();
    let fd = c.as_raw_fd();
    let writer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(400));
        s.write_all(b"late").unwrap();
        s
    });
    let before = HANDLED.load(Ordering::SeqCst);
    let (n, _, took) = interrupted(libc::SIGUSR2, move || {
        let mut buf = [0u8; 16];
        // SAFETY: a valid buffer.
        unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) }
    });
    assert_eq!(n, 4, "restarted, then the data");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(HANDLED.load(Ordering::SeqCst) > before);
    let _s = writer.join().unwrap();
    // A timeout on the socket: EINTR though SA_RESTART.
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (n, e, took) = interrupted(libc::SIGUSR2, move || {
        let mut buf = [0u8; 16];
        // SAFETY: a valid buffer.
        unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) }
    });
    assert_eq!((n, e), (-1, libc::EINTR), "recv with SO_RCVTIMEO");
    assert!(took < Duration::from_secs(3));
}

/// `siginterrupt(sig, 1)` turns `SA_RESTART` off: the call fails.
#[test]
fn siginterrupt_makes_a_restarting_handler_interrupt() {
    install(libc::SIGWINCH, true);
    // SAFETY: a signal with a handler.
    assert_eq!(unsafe { siginterrupt(libc::SIGWINCH, 1) }, 0);
    let (c, _s) = tcp_pair();
    let fd = c.as_raw_fd();
    let (n, e, _) = interrupted(libc::SIGWINCH, move || {
        let mut buf = [0u8; 16];
        // SAFETY: a valid buffer.
        unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) }
    });
    assert_eq!((n, e), (-1, libc::EINTR));
}

/// A signal the thread blocks interrupts nothing: the poll runs its time
/// out, and the handler runs once the thread unblocks it.
#[test]
fn a_blocked_signal_interrupts_nothing() {
    install(libc::SIGURG, false);
    let before = HANDLED.load(Ordering::SeqCst);
    let (r, _w) = pipe();
    let (n, _, took) = interrupted(libc::SIGURG, move || {
        // SAFETY: valid sets.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGURG);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            let mut p = libc::pollfd {
                fd: r,
                events: libc::POLLIN,
                revents: 0,
            };
            let n = libc::poll(&mut p, 1, 400) as isize;
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            n
        }
    });
    assert_eq!(n, 0, "the poll timed out");
    assert!(took >= Duration::from_millis(350), "{took:?}");
    assert!(
        HANDLED.load(Ordering::SeqCst) > before,
        "ran once unblocked"
    );
}

/// A signal sent to the process (not to a thread) interrupts a fiber's
/// call on the thread whose handler runs it: here the only thread that
/// does not block it. (A forked child, so that no other thread of the
/// test harness can take it.)
#[test]
fn a_signal_to_the_process_interrupts_the_fiber_whose_thread_takes_it() {
    const NAME: &str = "a_signal_to_the_process_interrupts_the_fiber_whose_thread_takes_it";
    if !util::is_child(NAME) {
        util::assert_child_ok(NAME);
        return;
    }
    install(libc::SIGUSR1, false);
    // SAFETY: fork in a process of one test thread and libtest's waiting
    // main thread; the child touches nothing the main thread holds.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // The child's one thread runs the runtime; the sender blocks the
        // signal, so the kernel can give it to this thread only (fibra's
        // own threads block it).
        let sender = {
            // SAFETY: valid sets; the sender inherits the block.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGUSR1);
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                let t = thread::spawn(|| {
                    thread::sleep(Duration::from_millis(150));
                    libc::kill(libc::getpid(), libc::SIGUSR1);
                });
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                t
            }
        };
        let (r, _w) = pipe();
        let (n, e) = fibra::run(move || {
            let mut p = libc::pollfd {
                fd: r,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut p, 1, 5000) };
            (n, errno())
        });
        sender.join().unwrap();
        // SAFETY: _exit ends the child at once.
        unsafe { libc::_exit(if (n, e) == (-1, libc::EINTR) { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status:#x}"
    );
    println!("CHILD OK");
}
