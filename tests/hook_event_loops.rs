//! The `hook` feature parks the waits of C event loops — `select`,
//! `pselect`, `ppoll`, `epoll_wait`, `epoll_pwait` — on the fds and the
//! deadline: twenty fibers of one thread each waiting 300 ms in one of
//! them take about 300 ms in all, a ticker fiber ticks meanwhile, and
//! each call answers what the kernel's would.
#![cfg(feature = "hook")]

mod util;

use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::{Duration, Instant};

use libc::c_int;

/// How long each fiber's call waits: calls that blocked the thread would
/// stall the ticker that long each, twenty in turn. 300 ms, not 100, so
/// that [`util::assert_parked`]'s bounds (a quarter and half of the twenty
/// waits) leave room for the freezes of a shared 2-core VM, up to a second.
const WAIT: Duration = Duration::from_millis(300);
const FIBERS: usize = 20;

/// [`util::assert_parked`] with `FIBERS` fibers waiting `WAIT`.
fn assert_parked(what: &str, one: impl Fn(usize) + Clone + 'static) {
    util::assert_parked(what, FIBERS, WAIT, one)
}

/// A Unix stream pair whose second end gets a byte after [`WAIT`], from a
/// plain thread.
fn pair_written_later() -> UnixStream {
    let (a, mut b) = UnixStream::pair().unwrap();
    thread::spawn(move || {
        thread::sleep(WAIT);
        b.write_all(b"!").unwrap();
        thread::sleep(Duration::from_secs(2)); // kept open meanwhile
    });
    a
}

fn fd_set_of(fd: RawFd) -> libc::fd_set {
    // SAFETY: an all-zero fd_set is empty; `fd` is below FD_SETSIZE.
    unsafe {
        let mut set: libc::fd_set = std::mem::zeroed();
        libc::FD_SET(fd, &mut set);
        set
    }
}

#[test]
fn select_parks_until_an_fd_is_readable() {
    assert_parked("select", |_| {
        let a = pair_written_later();
        let fd = a.as_raw_fd();
        let mut r = fd_set_of(fd);
        let mut tv = libc::timeval {
            tv_sec: 5,
            tv_usec: 0,
        };
        let null = std::ptr::null_mut();
        // SAFETY: valid sets and timeval.
        let n = unsafe { libc::select(fd + 1, &mut r, null, null, &mut tv) };
        assert_eq!(n, 1);
        // SAFETY: a valid set.
        assert!(unsafe { libc::FD_ISSET(fd, &r) });
        // Linux leaves the time that was left.
        assert!(tv.tv_sec < 5 && tv.tv_sec >= 3, "{} s left", tv.tv_sec);
    });
}

#[test]
fn select_times_out_with_the_sets_cleared() {
    assert_parked("select timeout", |_| {
        let (a, _b) = UnixStream::pair().unwrap();
        let fd = a.as_raw_fd();
        let mut r = fd_set_of(fd);
        let mut tv = libc::timeval {
            tv_sec: 0,
            tv_usec: WAIT.as_micros() as libc::suseconds_t,
        };
        let start = Instant::now();
        let null = std::ptr::null_mut();
        // SAFETY: valid sets and timeval.
        let n = unsafe { libc::select(fd + 1, &mut r, null, null, &mut tv) };
        assert_eq!(n, 0);
        assert!(start.elapsed() >= WAIT);
        // SAFETY: a valid set.
        assert!(
            !unsafe { libc::FD_ISSET(fd, &r) },
            "the set was not cleared"
        );
        assert_eq!((tv.tv_sec, tv.tv_usec), (0, 0));
    });
}

#[test]
fn pselect_parks_and_a_write_set_is_answered_at_once() {
    assert_parked("pselect", |_| {
        let a = pair_written_later();
        let fd = a.as_raw_fd();
        let mut r = fd_set_of(fd);
        let ts = libc::timespec {
            tv_sec: 5,
            tv_nsec: 0,
        };
        let null = std::ptr::null_mut();
        // SAFETY: valid sets and timespec; no signal mask.
        let n = unsafe { libc::pselect(fd + 1, &mut r, null, null, &ts, std::ptr::null()) };
        assert_eq!(n, 1);
        // A writable socket is ready at once, and pselect says so.
        let mut w = fd_set_of(fd);
        // SAFETY: as above.
        let n = unsafe { libc::pselect(fd + 1, null, &mut w, null, &ts, std::ptr::null()) };
        assert_eq!(n, 1);
    });
}

#[test]
fn ppoll_parks_until_an_fd_is_readable() {
    assert_parked("ppoll", |_| {
        let a = pair_written_later();
        let mut pfd = libc::pollfd {
            fd: a.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: 5,
            tv_nsec: 0,
        };
        // SAFETY: one valid pollfd and timespec; no signal mask.
        let n = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        assert_eq!(n, 1);
        assert_ne!(pfd.revents & libc::POLLIN, 0);
    });
}

/// An epoll fd of its own with `fd` added for reading.
fn epoll_with(fd: RawFd) -> c_int {
    // SAFETY: a new epoll fd (checked); `ev` is a valid event.
    unsafe {
        let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        assert!(ep >= 0);
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        assert_eq!(libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev), 0);
        ep
    }
}

#[test]
fn epoll_wait_parks_until_its_fds_have_events() {
    assert_parked("epoll_wait", |i| {
        let a = pair_written_later();
        let ep = epoll_with(a.as_raw_fd());
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 4];
        // SAFETY: `events` holds 4 events.
        let n = unsafe {
            if i % 2 == 0 {
                libc::epoll_wait(ep, events.as_mut_ptr(), 4, 5000)
            } else {
                libc::epoll_pwait(ep, events.as_mut_ptr(), 4, -1, std::ptr::null())
            }
        };
        assert_eq!(n, 1);
        let token = events[0].u64;
        assert_eq!(token, a.as_raw_fd() as u64);
        // SAFETY: our epoll fd, closed once.
        unsafe { libc::close(ep) };
    });
}

#[test]
fn epoll_wait_times_out() {
    assert_parked("epoll_wait timeout", |_| {
        let (a, _b) = UnixStream::pair().unwrap();
        let ep = epoll_with(a.as_raw_fd());
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 4];
        let start = Instant::now();
        // SAFETY: `events` holds 4 events.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), 4, WAIT.as_millis() as c_int) };
        assert_eq!(n, 0);
        assert!(start.elapsed() >= WAIT);
        // SAFETY: our epoll fd, closed once.
        unsafe { libc::close(ep) };
    });
}

/// Outside fibers nothing changes: a plain thread's select blocks it, and
/// answers as before.
#[test]
fn a_plain_thread_s_select_is_the_kernel_s() {
    let a = pair_written_later();
    let fd = a.as_raw_fd();
    let mut r = fd_set_of(fd);
    let null = std::ptr::null_mut();
    let start = Instant::now();
    // SAFETY: valid sets; no timeout.
    let n = unsafe { libc::select(fd + 1, &mut r, null, null, std::ptr::null_mut()) };
    assert_eq!(n, 1);
    assert!(start.elapsed() >= WAIT * 9 / 10);
}
