//! Connection calls: accept and connect.
//!
//! Neither has a per-call non-blocking flag (no `MSG_DONTWAIT`, no
//! `RWF_NOWAIT`), and the socket's own `O_NONBLOCK` is not ours to change:
//! it belongs to the open file description, which every `dup`, thread and
//! process sharing the socket sees, so flipping it for one call would hand
//! `EAGAIN` to a plain thread blocked in `accept` on a `try_clone`, and
//! race any other thread's own `fcntl(F_SETFL)`. So:
//!
//! - `accept` waits for the listener to be readable (a connection is
//!   queued), parked, and only then makes the blocking call, which takes
//!   that connection at once. If another thread or process takes it in
//!   between, the call blocks the thread until the next connection comes,
//!   as a blocking `accept` does (the socket's `SO_RCVTIMEO` still bounds
//!   it).
//! - `connect` has nothing to wait for before the call: the blocking call
//!   runs on the blocking pool while the fiber parks (a datagram socket's,
//!   which never waits, is made here). The kernel keeps
//!   every promise of it as it is (the `SO_SNDTIMEO` bound, `EINPROGRESS`
//!   when it passes). A cancellation or an expired `fibra::timeout` aborts
//!   the handshake (`shutdown`, which ends a connect in progress) and the
//!   call fails with `ECANCELED` or `ETIMEDOUT`, leaving the socket
//!   unconnected.

use libc::{c_int, sockaddr, socklen_t};

use super::call::{Call, hooked_socket};
use super::sys;
use crate::blocking;
use crate::io::Interest;
use crate::scheduler::park::Halted;

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

/// accept4(2): in a fiber, on a blocking listener, parks until a
/// connection is queued, then takes it (see the module docs).
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
    // Parked until a connection is queued; `EAGAIN` at once for a
    // non-blocking listener with none, or at its SO_RCVTIMEO. Only a call
    // the kernel would make wait: valid flags, on a listening socket (a
    // datagram socket, or one that does not listen, is refused at once).
    let valid = flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) == 0;
    if valid
        && let Some((core, what)) = hooked_socket(fd)
        && !readable_now(fd)
        && sys::sockopt(fd, libc::SO_ACCEPTCONN, 0 as c_int) == Ok(1)
        && let Err(r) = Call::new(core, fd, what, Interest::READABLE).wait_ready()
    {
        return sys::ret(r) as c_int;
    }
    sys::ret(call()) as c_int
}

/// Whether `fd` is readable now (a listener: a connection is queued).
fn readable_now(fd: c_int) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { sys::poll_now(&mut pfd, 1) };
    n != 0
}

/// connect(2): in a fiber, on a blocking socket, the call runs on the
/// blocking pool while the fiber parks (see the module docs).
///
/// # Safety
///
/// As connect(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let (addr, len) = (addr as usize, len as usize);
    let call = move || {
        // SAFETY: the caller's contract, passed to the kernel (the address
        // outlives the call: the hook returns only after it).
        unsafe { sys::call(libc::SYS_connect, &[fd as usize, addr, len]) }
    };
    if hooked_socket(fd).is_some() {
        let mode = sys::get_fl(fd);
        // A datagram socket's connect only sets its peer: it never waits,
        // and is not worth a hand-over to the pool.
        let datagram = sys::sockopt(fd, libc::SO_TYPE, 0 as c_int) == Ok(libc::SOCK_DGRAM);
        if mode >= 0 && mode & libc::O_NONBLOCK as isize == 0 && !datagram {
            let (r, halted) = blocking::run_interruptible(call, || {
                // Ends a handshake in progress; the call then returns.
                // SAFETY: shutdown(2) reads no memory.
                unsafe { sys::call(libc::SYS_shutdown, &[fd as usize, libc::SHUT_RDWR as usize]) };
            });
            // Once interrupted, the socket may be shut down even if the
            // handshake won the race: the call fails either way.
            let r = match halted {
                Some(Halted::Cancelled) => -(libc::ECANCELED as isize),
                Some(_) => -(libc::ETIMEDOUT as isize),
                None => r,
            };
            return sys::ret(r) as c_int;
        }
    }
    sys::ret(call()) as c_int
}
