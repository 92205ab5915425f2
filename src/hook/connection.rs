//! Connection calls: accept and connect. Neither has a per-call
//! non-blocking flag, so the fd is made `O_NONBLOCK` for the system call
//! and restored at once; the fiber parks in between ([`Call`]).

use libc::{c_int, sockaddr, socklen_t};

use super::call::{Call, Step, finish, hooked};
use super::sys::{self, EAGAIN};
use super::wait::{self, Waited};
use crate::io::Interest;
use crate::scheduler::core::Core;

/// accept(2).
///
/// # Safety
///
/// As accept(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { accept4(fd, addr, len, 0) }
}

/// accept4(2). There is no per-call non-blocking flag: the listener is made
/// `O_NONBLOCK` for each try and restored at once.
///
/// # Safety
///
/// As accept4(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    let call = || {
        // SAFETY: the caller's contract, passed to the kernel.
        unsafe {
            sys::call(
                libc::SYS_accept4,
                &[fd as usize, addr as usize, len as usize, flags as usize],
            )
        }
    };
    if let Some((core, uid)) = hooked(fd) {
        let mode = sys::get_fl(fd);
        if mode >= 0 && mode & libc::O_NONBLOCK as isize == 0 {
            let step = Call::new(core, fd, uid, Interest::READABLE).run(|| {
                if sys::set_fl(fd, mode | libc::O_NONBLOCK as isize) < 0 {
                    return call(); // cannot: block the thread
                }
                let r = call();
                sys::set_fl(fd, mode);
                r
            });
            return finish(step, call) as c_int;
        }
    }
    sys::ret(call()) as c_int
}

/// connect(2). There is no per-call non-blocking flag: the socket is made
/// `O_NONBLOCK` for the system call and restored at once; then the fiber
/// waits for the connection, at most the socket's `SO_SNDTIMEO` (then
/// `EINPROGRESS`, as the kernel's blocking connect says).
///
/// # Safety
///
/// As connect(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let call = || {
        // SAFETY: the caller's contract, passed to the kernel.
        unsafe {
            sys::call(
                libc::SYS_connect,
                &[fd as usize, addr as usize, len as usize],
            )
        }
    };
    if let Some((core, uid)) = hooked(fd)
        && let Some(r) = connect_parked(core, fd, uid, call)
    {
        return sys::ret(r) as c_int;
    }
    sys::ret(call()) as c_int
}

/// A connect that parks while the handshake runs; `None`: make the real
/// call instead (a non-blocking socket; a Unix socket whose listener's
/// backlog is full, which has nothing to wait on).
fn connect_parked(core: &Core, fd: c_int, uid: u64, call: impl Fn() -> isize) -> Option<isize> {
    let mode = sys::get_fl(fd);
    if mode < 0 || mode & libc::O_NONBLOCK as isize != 0 {
        return None;
    }
    if sys::set_fl(fd, mode | libc::O_NONBLOCK as isize) < 0 {
        return None;
    }
    let r = call();
    sys::set_fl(fd, mode);
    if r == EAGAIN {
        return None;
    }
    if r != -(libc::EINPROGRESS as isize) {
        return Some(r);
    }
    let c = Call::new(core, fd, uid, Interest::WRITABLE);
    let deadline = match c.would_block() {
        Ok(deadline) => deadline,
        Err(Step::Done(r)) => return Some(r),
        Err(Step::Real) => return Some(-(libc::EINPROGRESS as isize)),
    };
    loop {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { sys::poll_now(&mut pfd, 1) };
        if ready != 0 {
            if ready < 0 {
                return Some(ready);
            }
            return Some(match sys::sockopt(fd, libc::SO_ERROR, 0 as c_int) {
                Ok(0) => 0,
                Ok(e) => -(e as isize),
                Err(e) => e,
            });
        }
        match wait::socket(core, fd, uid, Interest::WRITABLE, deadline) {
            Waited::Woken => {}
            Waited::Unwatchable => {
                // Wait in the kernel, then look as above.
                pfd.revents = 0;
                // SAFETY: one valid pollfd.
                unsafe { sys::call(libc::SYS_poll, &[(&raw mut pfd) as usize, 1, usize::MAX]) };
            }
            w => return Some(-(w.errno(libc::EINPROGRESS) as isize)),
        }
    }
}
