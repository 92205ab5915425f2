//! `fork` in a fiber (issue 61, finding 7): the child runs plain blocking
//! calls, as a program with no runtime does, and never touches its
//! parent's epoll instance, timers or helper threads; an exec'd child
//! inherits no fd of fibra's. Before, the child sat in the parent's
//! runtime: a forked worker waited forever in `epoll_wait` (the shared
//! instance), another in a futex wait for a pool thread it did not have.
//!
//! Each test runs in a child process of its own (one test thread), so
//! that no other test's thread holds a lock of fibra's when it forks.

mod util;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::{Duration, Instant};

use libc::c_int;

fn pipe() -> (c_int, c_int) {
    let mut fds = [0; 2];
    // SAFETY: a valid array for two fds.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    (fds[0], fds[1])
}

/// Waits for `pid` without blocking the runtime's thread; its status.
fn wait_child(pid: libc::pid_t) -> c_int {
    let start = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: our child; WNOHANG does not block.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return status;
        }
        assert_eq!(r, 0, "waitpid");
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the forked child hangs"
        );
        fibra::sleep(Duration::from_millis(5));
    }
}

/// What the forked child checks, as its exit status: 0 if all held.
fn child_checks(c: &mut fibra::net::TcpStream) -> i32 {
    // fibra's own sleep and std's (hooked with the feature): both block
    // this thread, which is in no runtime now.
    let start = Instant::now();
    fibra::sleep(Duration::from_millis(30));
    std::thread::sleep(Duration::from_millis(30));
    if start.elapsed() < Duration::from_millis(55) {
        return 2;
    }
    if fibra::try_current().is_some() {
        return 3; // still "in a fiber"
    }
    // A socket of the parent's runtime, written plainly.
    if c.write_all(b"from the child").is_err() {
        return 4;
    }
    // A runtime of the child's own, with a pool thread of its own.
    let seven = fibra::run(|| {
        fibra::spawn(|| {
            fibra::sleep(Duration::from_millis(5));
            fibra::spawn_blocking(|| 7)
        })
        .join()
        .unwrap()
    });
    if seven != 7 {
        return 5;
    }
    0
}

/// A fiber forks while another fiber of the runtime waits, parked, on a
/// socket registered in the runtime's epoll instance. The child sleeps
/// (fibra's sleep and std's), writes to a socket of the parent's, starts
/// a runtime of its own and `_exit`s. The parent's waiting fiber then gets
/// what the child wrote: the child took no event from the shared epoll
/// instance and removed no registration; the parent's timers still fire.
#[test]
fn a_child_forked_in_a_fiber_runs_plain_blocking_code() {
    const NAME: &str = "a_child_forked_in_a_fiber_runs_plain_blocking_code";
    if !util::is_child(NAME) {
        util::assert_child_ok(NAME);
        return;
    }
    fibra::run(|| {
        let l = fibra::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = fibra::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let reader = fibra::spawn(move || {
            let mut buf = [0u8; 14];
            s.read_exact(&mut buf).unwrap();
            buf
        });
        fibra::yield_now(); // the reader parks on its socket
        let status = fibra::spawn(move || {
            // SAFETY: fork; the child only makes calls that are safe in
            // it (one thread of a process whose other threads are fibra's
            // helpers and libtest's idle main thread), then _exit.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0);
            if pid == 0 {
                let code = child_checks(&mut c);
                // SAFETY: ends the child at once, running nothing more.
                unsafe { libc::_exit(code) };
            }
            wait_child(pid)
        })
        .join()
        .unwrap();
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child's checks: status {status:#x}"
        );
        assert_eq!(&reader.join().unwrap(), b"from the child");
        let start = Instant::now();
        fibra::sleep(Duration::from_millis(20));
        assert!(start.elapsed() >= Duration::from_millis(20));
    });
    println!("CHILD OK");
}

/// A child that returns from the fiber that forked would run its copy of
/// the parent's runtime (its other fibers, the shared epoll instance): it
/// is ended instead, with a message that says what to do.
#[test]
fn a_forked_child_that_returns_to_the_runtime_is_ended_with_a_message() {
    const NAME: &str = "a_forked_child_that_returns_to_the_runtime_is_ended_with_a_message";
    if !util::is_child(NAME) {
        util::assert_child_ok(NAME);
        return;
    }
    let (r, w) = pipe();
    let (status, said) = fibra::run(move || {
        let ticker = fibra::spawn(|| {
            for _ in 0..20 {
                fibra::sleep(Duration::from_millis(5));
            }
            "the parent's ticker"
        });
        let pid = fibra::spawn(move || {
            // SAFETY: as above.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // The child's stderr goes to the parent's pipe.
                // SAFETY: our fds.
                unsafe { libc::dup2(w, 2) };
            }
            pid // the child returns from its fiber
        })
        .join()
        .unwrap();
        assert!(pid > 0, "the child ran on in its copy of the runtime");
        // SAFETY: our write end, no longer needed here.
        unsafe { libc::close(w) };
        let status = wait_child(pid);
        // SAFETY: our read end, owned by the File from now on.
        let mut said = String::new();
        unsafe { std::fs::File::from_raw_fd(r) }
            .read_to_string(&mut said)
            .unwrap();
        assert_eq!(ticker.join().unwrap(), "the parent's ticker");
        (status, said)
    });
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 70,
        "status {status:#x}, said {said:?}"
    );
    assert!(said.contains("must exec or _exit"), "{said:?}");
    println!("CHILD OK");
}

/// The fds a process has open, as `readlink` names them, listed by a
/// shell exec'd in a forked child (`fork` then `execv`), and by one that
/// `std::process::Command` starts.
#[test]
fn an_execd_child_inherits_no_fd_of_fibra_s() {
    const NAME: &str = "an_execd_child_inherits_no_fd_of_fibra_s";
    if !util::is_child(NAME) {
        util::assert_child_ok(NAME);
        return;
    }
    const LIST: &str = "for f in /proc/$$/fd/*; do echo \"$f $(readlink $f)\"; done";
    // What a shell lists before fibra runs in this process: the test
    // runner's fds that an exec keeps (cargo's jobserver pipe, say), and
    // the shell's own (its command substitution's pipe).
    let fd_numbers = |listing: &str| -> Vec<u32> {
        listing
            .lines()
            .filter_map(|l| l.split_once(' ')?.0.rsplit('/').next()?.parse().ok())
            .collect()
    };
    let baseline = std::process::Command::new("/bin/sh")
        .args(["-c", LIST])
        .output()
        .unwrap();
    let baseline = fd_numbers(&String::from_utf8_lossy(&baseline.stdout));
    let rt = fibra::Runtime::builder()
        .workers(1)
        .stall_warning(Duration::from_millis(50))
        .build()
        .unwrap();
    let (by_fork, by_command) = rt
        .spawn(move || {
            // Everything that opens fds of fibra's: the reactor (epoll,
            // eventfd, timerfd), the blocking pool, the signal pipe, a
            // socket's registration, a dump, the hook's io_uring.
            fibra::spawn_blocking(|| ());
            let _signals = fibra::signal::Signals::new(&[libc::SIGUSR1]).unwrap();
            let l = fibra::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let _c = fibra::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            // With the hook, std's connect in a fiber: the reactor's io_uring.
            #[cfg(feature = "hook")]
            let _hooked = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (r, w) = pipe();
            // SAFETY: fork, then in the child only dup2 and execv.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: our pipe's write end as stdout; a shell with
                // NUL-terminated arguments.
                unsafe {
                    libc::dup2(w, 1);
                    let sh = c"/bin/sh";
                    let script = std::ffi::CString::new(LIST).unwrap();
                    let argv = [
                        sh.as_ptr(),
                        c"-c".as_ptr(),
                        script.as_ptr(),
                        std::ptr::null(),
                    ];
                    libc::execv(sh.as_ptr(), argv.as_ptr());
                    libc::_exit(127);
                }
            }
            // SAFETY: our write end, no longer needed here.
            unsafe { libc::close(w) };
            let mut by_fork = String::new();
            // SAFETY: our read end, owned by the File from now on.
            unsafe { std::fs::File::from_raw_fd(r) }
                .read_to_string(&mut by_fork)
                .unwrap();
            wait_child(pid);
            let out = std::process::Command::new("/bin/sh")
                .args(["-c", LIST])
                .output()
                .unwrap();
            let _keep = l.as_raw_fd();
            (by_fork, String::from_utf8_lossy(&out.stdout).into_owned())
        })
        .join()
        .unwrap();
    for (how, listing) in [("fork+exec", &by_fork), ("Command", &by_command)] {
        assert!(fd_numbers(listing).len() >= 3, "{how}: {listing}");
        for (fd, line) in fd_numbers(listing).into_iter().zip(listing.lines()) {
            assert!(
                baseline.contains(&fd),
                "{how}: the child inherited {line}\n{listing}\nbefore fibra: {baseline:?}"
            );
        }
    }
    println!("CHILD OK");
}
