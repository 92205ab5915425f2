//! The tools of every case: `errno` around a call, the fds a case makes,
//! and the kernel called directly (not through the hooks) to set a case
//! up and to look at what its call did.

use std::ptr;
use std::thread;
use std::time::{Duration, Instant};

use libc::{c_int, pollfd, sockaddr, socklen_t};

use crate::harness::{digest, errno_name};

/// What `errno` is set to before each call: a call that leaves it alone
/// shows it.
pub(crate) const SENTINEL: c_int = 12345;
/// The same, for `h_errno`.
pub(crate) const H_SENTINEL: c_int = 54321;

pub(crate) fn errno() -> c_int {
    // SAFETY: this thread's errno, always valid.
    unsafe { *libc::__errno_location() }
}

pub(crate) fn set_errno(v: c_int) {
    // SAFETY: this thread's errno, always valid.
    unsafe { *libc::__errno_location() = v };
}

pub(crate) fn h_errno() -> c_int {
    // SAFETY: this thread's h_errno, always valid.
    unsafe { *__h_errno_location() }
}

pub(crate) fn set_h_errno(v: c_int) {
    // SAFETY: this thread's h_errno, always valid.
    unsafe { *__h_errno_location() = v };
}

// What the `libc` crate does not declare for glibc.
unsafe extern "C" {
    fn __h_errno_location() -> *mut c_int;
}

/// Makes a call with `errno` at [`SENTINEL`]; its result and `errno` right
/// after.
pub(crate) fn call<R>(f: impl FnOnce() -> R) -> (R, c_int) {
    set_errno(SENTINEL);
    let r = f();
    (r, errno())
}

/// The fds a case made, closed when it ends.
#[derive(Default)]
pub(crate) struct Fds(Vec<c_int>);

impl Fds {
    pub(crate) fn keep(&mut self, fd: c_int) -> c_int {
        assert!(fd >= 0, "setup: {}", std::io::Error::last_os_error());
        self.0.push(fd);
        fd
    }

    /// Closes `fd` now.
    pub(crate) fn close(&mut self, fd: c_int) {
        self.0.retain(|&f| f != fd);
        // SAFETY: our fd.
        unsafe { libc::close(fd) };
    }

    /// Forgets `fd`: the case closed it.
    pub(crate) fn forget(&mut self, fd: c_int) {
        self.0.retain(|&f| f != fd);
    }
}

impl Drop for Fds {
    fn drop(&mut self) {
        for &fd in self.0.iter().rev() {
            // SAFETY: our fds.
            unsafe { libc::close(fd) };
        }
    }
}

pub(crate) fn ok(r: c_int, what: &str) -> c_int {
    assert!(r >= 0, "setup: {what}: {}", std::io::Error::last_os_error());
    r
}

// The kernel, called without the hooks (libc::syscall is not hooked):
// setup and inspection that must not depend on the code under test.

pub(crate) fn raw_read(fd: c_int, buf: &mut [u8]) -> Result<usize, c_int> {
    // SAFETY: `buf` is valid for writes of its length.
    let r = unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) };
    if r < 0 { Err(errno()) } else { Ok(r as usize) }
}

/// A read that never blocks: `MSG_DONTWAIT` on a socket (one that polls
/// readable may still have nothing to read: only an error queued); a plain
/// read on anything else, which the caller polled first.
pub(crate) fn raw_read_nowait(fd: c_int, buf: &mut [u8]) -> Result<usize, c_int> {
    // SAFETY: `buf` is valid for writes of its length; no address.
    let r = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            libc::MSG_DONTWAIT,
            ptr::null_mut::<sockaddr>(),
            ptr::null_mut::<socklen_t>(),
        )
    };
    match r {
        r if r >= 0 => Ok(r as usize),
        _ if errno() == libc::ENOTSOCK => raw_read(fd, buf),
        _ => Err(errno()),
    }
}

pub(crate) fn raw_write(fd: c_int, data: &[u8]) -> isize {
    // SAFETY: `data` is valid for reads of its length.
    unsafe { libc::syscall(libc::SYS_write, fd, data.as_ptr(), data.len()) as isize }
}

pub(crate) fn raw_send(fd: c_int, data: &[u8], flags: c_int) -> isize {
    // SAFETY: `data` is valid for reads of its length; no address.
    unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd,
            data.as_ptr(),
            data.len(),
            flags,
            ptr::null::<sockaddr>(),
            0,
        ) as isize
    }
}

/// `poll` of one fd for up to `ms`: its revents (0: nothing in time).
pub(crate) fn raw_poll(fd: c_int, events: i16, ms: c_int) -> i16 {
    let mut p = pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::syscall(libc::SYS_poll, &mut p as *mut pollfd, 1, ms) };
    if r > 0 { p.revents } else { 0 }
}

/// Whether `fd` is open.
pub(crate) fn is_open(fd: c_int) -> bool {
    // SAFETY: F_GETFD reads no memory.
    unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFD) >= 0 }
}

/// What can be read from `fd` now (after waiting up to `wait_ms` for the
/// first of it), and how reading ended: `|eof`, `|err=N` or `|idle`. A
/// datagram socket's datagrams each come with their length.
pub(crate) fn drain(fd: c_int, wait_ms: c_int, dgram: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    let mut wait = wait_ms;
    let end = loop {
        let re = raw_poll(fd, libc::POLLIN, wait);
        wait = 0;
        if re & libc::POLLNVAL != 0 {
            break "|nval".to_string();
        }
        if re & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) == 0 {
            break "|idle".to_string();
        }
        match raw_read_nowait(fd, &mut buf) {
            Ok(0) if !dgram => break "|eof".to_string(),
            Ok(n) => {
                if dgram {
                    out.extend(format!("<{n}>").bytes());
                }
                out.extend_from_slice(&buf[..n]);
            }
            Err(e) => break format!("|err={}", errno_name(e)),
        }
        if out.len() > 64 << 20 {
            break "|more".to_string();
        }
    };
    if out.len() > 256 {
        out = digest(&out);
    }
    out.extend(end.bytes());
    out
}

/// A thread that writes `data` to `fd` after `ms`.
pub(crate) fn later(fd: c_int, data: &'static [u8], ms: u64) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(ms));
        raw_write(fd, data);
    })
}

/// Makes `call` while a thread writes to `late` (if given) 30 ms in, and
/// waits for that thread: what `call` returned.
pub(crate) fn with_late_write<R>(late: Option<c_int>, call: impl FnOnce() -> R) -> R {
    let writer = late.map(|fd| later(fd, b"late", 30));
    let r = call();
    if let Some(t) = writer {
        t.join().unwrap();
    }
    r
}

/// Waits up to a second for `fd` to show one of `events`.
pub(crate) fn await_ready(fd: c_int, events: i16) {
    raw_poll(fd, events, 1000);
}

/// An fd number nothing has open in a child process.
pub(crate) const CLOSED: c_int = 1900;

pub(crate) fn closed_fd() -> c_int {
    assert!(!is_open(CLOSED), "fd {CLOSED} is open");
    CLOSED
}

/// The socket timeout that bounds a call the kernel would not make wait
/// (a hook that waits anyway returns at it, not at once).
pub(crate) const BOUND_MS: i64 = 300;
/// A call that returned within this did not wait for [`BOUND_MS`].
pub(crate) const PROMPT_MS: u128 = 150;

pub(crate) fn elapsed_ms(t: Instant) -> u128 {
    t.elapsed().as_millis()
}
