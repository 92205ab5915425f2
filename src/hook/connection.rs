//! Connection calls: accept and connect.
//!
//! Neither has a per-call non-blocking flag (no `MSG_DONTWAIT`, no
//! `RWF_NOWAIT`), and the socket's own `O_NONBLOCK` is not ours to change:
//! it belongs to the open file description, which every `dup`, thread and
//! process sharing the socket sees, so flipping it for one call would hand
//! `EAGAIN` to a plain thread blocked in `accept` on a `try_clone`, and
//! race any other thread's own `fcntl(F_SETFL)`.
//!
//! So, in a fiber, on a blocking socket, the runtime's io_uring makes the
//! call (`scheduler::completion`): the kernel never blocks in it, whatever
//! the socket's flags, and where it must wait it watches the socket itself
//! and completes the call when it is ready, while the fiber parks. No
//! thread waits: 10 000 connects in flight cost 10 000 parked fibers.
//! Everything the blocking call promises is kept:
//!
//! - `SO_SNDTIMEO` bounds a connect (then `EINPROGRESS`, the handshake
//!   going on, as the kernel's), `SO_RCVTIMEO` an accept (`EAGAIN`);
//! - a signal handler ends the call as it ends the kernel's (`EINTR`
//!   without `SA_RESTART` or with a socket timeout; else it goes on; a
//!   connect's handshake goes on either way, as POSIX says);
//! - an accept that another thread races takes the next connection instead
//!   of blocking the thread (the kernel retries it).
//!
//! A cancellation or an expired `fibra::timeout` cancels the call (its
//! completion is waited for: the kernel writes the caller's memory until
//! then) and it fails with `ECANCELED` or `ETIMEDOUT`; a handshake in
//! progress is aborted (`shutdown`), leaving the socket unconnected. If the
//! kernel finished the call first, its answer stands (a connected socket,
//! an accepted connection: nothing is lost).
//!
//! Where io_uring is refused (a kernel before 5.7, a seccomp filter,
//! `FIBRA_NO_IO_URING=1`), the calls are made as before it: `accept` parks
//! until a connection is queued, then takes it (blocking the thread if
//! another took it first); `connect` runs on the blocking pool while the
//! fiber parks, a pool thread for each connect in flight.

use libc::{c_int, sockaddr, socklen_t};

use super::call::{Call, hooked_socket};
use super::sys;
use super::wait::{self, Waited};
use crate::blocking;
use crate::io::Interest;
use crate::scheduler::completion::Completion;
use crate::scheduler::core::Core;
use crate::scheduler::interrupt::{self, Interrupted};
use crate::scheduler::park::Halted;
use crate::timer::clock;

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

/// accept4(2): in a fiber, on a blocking listener, the fiber parks until
/// the kernel has taken a connection for it (see the module docs).
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
    // Only a call the kernel would make wait goes through the ring or
    // parks: valid flags, on a blocking socket (the kernel's answer to
    // anything else comes at once, from the call itself).
    let valid = flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) == 0;
    let Some((core, what)) = hooked_socket(fd).filter(|_| valid && blocking_fd(fd)) else {
        return sys::ret(call()) as c_int;
    };
    // SAFETY: `addr` and `len` are the caller's, valid for accept4(2) (its
    // contract) until this call returns, and the `Completion` ends before.
    if let Ok(op) = unsafe { Completion::accept(core, fd, addr, len, flags) } {
        let r = match complete(core, fd, &op, libc::SO_RCVTIMEO) {
            Ok(r) => r,
            Err(Ended::TimedOut) => -libc::EAGAIN,
            Err(Ended::Interrupted) => -libc::EINTR,
            Err(Ended::Halted(errno)) => -errno,
        };
        return sys::ret(r as isize) as c_int;
    }
    // No ring: parked until a connection is queued (a listening socket's
    // only: one that does not listen is refused at once), then the call.
    if !readable_now(fd)
        && sys::sockopt(fd, libc::SO_ACCEPTCONN, 0 as c_int) == Ok(1)
        && let Err(r) = Call::new(core, fd, what, Interest::READABLE).wait_ready()
    {
        return sys::ret(r) as c_int;
    }
    sys::ret(call()) as c_int
}

/// Whether `fd` is open and blocking (its description's `O_NONBLOCK` off).
fn blocking_fd(fd: c_int) -> bool {
    let mode = sys::get_fl(fd);
    mode >= 0 && mode & libc::O_NONBLOCK as isize == 0
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

/// How a call through the ring ended without the kernel's own answer.
enum Ended {
    /// The socket's timeout passed.
    TimedOut,
    /// A signal handler ended it.
    Interrupted,
    /// The fiber was cancelled (`ECANCELED`) or its `fibra::timeout`
    /// expired (`ETIMEDOUT`).
    Halted(c_int),
}

/// Parks until `op` (a call on socket `fd`) completes, at most the socket's
/// timeout `opt` (`SO_RCVTIMEO`, `SO_SNDTIMEO`), and returns the kernel's
/// answer; or cancels the call when the wait ends otherwise (see the
/// module docs) and says why, unless the kernel finished it first.
fn complete(core: &Core, fd: c_int, op: &Completion<'_>, opt: c_int) -> Result<i32, Ended> {
    if let Some(r) = op.result() {
        return Ok(r); // (done within the submission: no park)
    }
    let deadline = socket_timeout(fd, opt);
    let mut since = interrupt::epoch();
    loop {
        op.rearm();
        let ended = match wait::park(core, deadline, op.wait_on(), since) {
            Waited::Woken | Waited::Unwatchable => None,
            Waited::Interrupted(Interrupted::Restartable) if deadline.is_none() => {
                since = interrupt::epoch(); // restarted, as the kernel does
                None
            }
            Waited::Interrupted(_) => Some(Ended::Interrupted),
            Waited::TimedOut => Some(Ended::TimedOut),
            w => Some(Ended::Halted(w.errno(libc::ETIMEDOUT))),
        };
        if let Some(r) = op.result() {
            return Ok(r);
        }
        if let Some(ended) = ended {
            op.cancel();
            return match op.finish() {
                r if r == -libc::ECANCELED => Err(ended),
                r => Ok(r), // the kernel finished first: its answer stands
            };
        }
    }
}

/// The deadline of socket `fd`'s timeout `opt`, if it has one.
fn socket_timeout(fd: c_int, opt: c_int) -> Option<u64> {
    let zero = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    let tv = sys::sockopt(fd, opt, zero).ok()?;
    let ns = (tv.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(tv.tv_usec as u64 * 1000);
    (ns != 0).then(|| clock::now_ns().saturating_add(ns))
}

/// connect(2): in a fiber, on a blocking socket, the fiber parks until the
/// kernel has connected it (see the module docs).
///
/// # Safety
///
/// As connect(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let (addr_word, len_word) = (addr as usize, len as usize); // (a closure the pool can take)
    let call = move || {
        // SAFETY: the caller's contract, passed to the kernel (the address
        // outlives the call: the hook returns only after it).
        unsafe { sys::call(libc::SYS_connect, &[fd as usize, addr_word, len_word]) }
    };
    // A datagram socket's connect only sets its peer: it never waits.
    let Some((core, what)) = hooked_socket(fd).filter(|_| {
        blocking_fd(fd) && sys::sockopt(fd, libc::SO_TYPE, 0 as c_int) != Ok(libc::SOCK_DGRAM)
    }) else {
        return sys::ret(call()) as c_int;
    };
    // SAFETY: `addr` is the caller's, valid for `len` bytes (its contract)
    // until this call returns, and the `Completion` ends before.
    if let Ok(op) = unsafe { Completion::connect(core, fd, addr, len) } {
        let r = match complete(core, fd, &op, libc::SO_SNDTIMEO) {
            // A handshake in progress (an earlier connect ended by a
            // signal or by its timeout): the ring's connect, non-blocking,
            // says so, where the kernel's blocking one waits for its end.
            Ok(r) if r == -libc::EALREADY => {
                drop(op);
                return sys::ret(handshake_end(core, fd, what)) as c_int;
            }
            Ok(r) => r,
            // As the kernel's: the handshake goes on.
            Err(Ended::TimedOut) => -libc::EINPROGRESS,
            Err(Ended::Interrupted) => -libc::EINTR,
            Err(Ended::Halted(errno)) => {
                abort_handshake(fd);
                -errno
            }
        };
        return sys::ret(r as isize) as c_int;
    }
    // No ring: the blocking call on the pool while the fiber parks.
    let (r, halted) = blocking::run_interruptible(call, || abort_handshake(fd));
    // Once interrupted, the socket may be shut down even if the handshake
    // won the race: the call fails either way.
    let r = match halted {
        Some(Halted::Cancelled) => -(libc::ECANCELED as isize),
        Some(_) => -(libc::ETIMEDOUT as isize),
        None => r,
    };
    sys::ret(r) as c_int
}

/// Waits, parked, for the end of socket `fd`'s handshake in progress, as
/// a blocking connect does on a socket already connecting: 0 once
/// connected, the handshake's error if it failed; its timeout and signals
/// end the wait as they end the kernel's.
fn handshake_end(core: &Core, fd: c_int, what: super::fds::Fd) -> isize {
    if let Err(r) = Call::new(core, fd, what, Interest::WRITABLE).wait_ready() {
        return if r == -(libc::EAGAIN as isize) {
            -(libc::EINPROGRESS as isize) // its SO_SNDTIMEO: as the kernel
        } else {
            r
        };
    }
    match sys::sockopt(fd, libc::SO_ERROR, 0 as c_int) {
        Ok(0) => {}
        Ok(e) => return -(e as isize),
        Err(r) => return r,
    }
    let mut peer: libc::sockaddr_storage = zeroed_storage();
    let mut len = size_of::<libc::sockaddr_storage>() as socklen_t;
    // SAFETY: a valid address buffer of the size given.
    let r = unsafe {
        sys::call(
            libc::SYS_getpeername,
            &[
                fd as usize,
                (&raw mut peer) as usize,
                (&raw mut len) as usize,
            ],
        )
    };
    if r == 0 {
        0
    } else {
        -(libc::ECONNABORTED as isize)
    }
}

/// An all-zero `sockaddr_storage`.
fn zeroed_storage() -> libc::sockaddr_storage {
    // SAFETY: a plain C struct of integers, for which zero is valid.
    unsafe { std::mem::zeroed() }
}

/// Ends socket `fd`'s handshake in progress (a blocked connect returns).
fn abort_handshake(fd: c_int) {
    // SAFETY: shutdown(2) reads no memory.
    unsafe { sys::call(libc::SYS_shutdown, &[fd as usize, libc::SHUT_RDWR as usize]) };
}
