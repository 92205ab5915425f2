//! poll(2): the fiber parks until one of the fds is ready or the timeout
//! passes.
//!
//! Readiness has no blocking mode, so any fd epoll can watch (sockets,
//! pipes, eventfds, ttys) is waited on in the reactor; each wait registers
//! the fds for as long as it parks, as `fibra::io::wait` does. The answer
//! (`revents`, the count) always comes from the kernel: a `poll` with a
//! zero timeout after every wake-up.

use libc::{c_int, nfds_t, pollfd};

use super::sys;
use super::wait::{self, Waited};
use crate::io::Interest;
use crate::scheduler::core::Core;
use crate::scheduler::interrupt;
use crate::timer::clock;

/// More fds than a process may have open (Linux's ceiling, `nr_open`):
/// the kernel refuses them (`EINVAL`) without reading the array, and the
/// hook leaves such a call to it.
const MAX_NFDS: nfds_t = 1 << 30;

/// ppoll(2): as `poll`; with a signal mask (which the kernel would set
/// for the wait alone, atomically — a parked fiber cannot) the kernel
/// waits, blocking the thread.
///
/// # Safety
///
/// As ppoll(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    nfds: nfds_t,
    timeout: *const libc::timespec,
    sigmask: *const libc::sigset_t,
) -> c_int {
    if sigmask.is_null()
        && nfds <= MAX_NFDS
        // SAFETY: the caller's contract: null or a valid timespec.
        && let Some(deadline) = unsafe { wait::deadline_of(timeout) }
        && let Some(core) = super::parkable()
    {
        // SAFETY: the caller's contract.
        return sys::ret(unsafe { poll_until(core, fds, nfds, deadline) }) as c_int;
    }
    // The kernel writes the time left into the timespec, which the caller
    // gave as `const`: give it a copy, as glibc does.
    // SAFETY: the caller's contract: null or a valid timespec.
    let mut ts = unsafe { timeout.as_ref() }.copied();
    let tsp = ts
        .as_mut()
        .map_or(std::ptr::null_mut(), |t| t as *mut libc::timespec);
    // SAFETY: the caller's fds and mask, our copy of the timeout (the size
    // of the kernel's sigset: 8 bytes).
    let r = unsafe {
        sys::call6(
            libc::SYS_ppoll,
            fds as usize,
            nfds as usize,
            tsp as usize,
            sigmask as usize,
            8,
            0,
        )
    };
    sys::ret(r) as c_int
}

/// poll(2).
///
/// # Safety
///
/// As poll(2): `fds` points to `nfds` valid `pollfd`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn poll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    if timeout != 0
        && nfds <= MAX_NFDS
        && let Some(core) = super::parkable()
    {
        // SAFETY: the caller's contract.
        return sys::ret(unsafe { poll_parked(core, fds, nfds, timeout) }) as c_int;
    }
    // SAFETY: the caller's contract, passed to the kernel.
    sys::ret(unsafe { real(fds, nfds, timeout) }) as c_int
}

/// # Safety
///
/// As poll(2).
unsafe fn real(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> isize {
    // SAFETY: the caller's contract, passed to the kernel.
    unsafe {
        sys::call(
            libc::SYS_poll,
            &[fds as usize, nfds as usize, timeout as usize],
        )
    }
}

/// # Safety
///
/// As poll(2).
unsafe fn poll_parked(core: &Core, fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> isize {
    let deadline = u64::try_from(timeout)
        .ok()
        .map(|ms| clock::now_ns().saturating_add(ms * 1_000_000));
    // SAFETY: the caller's contract.
    unsafe { poll_until(core, fds, nfds, deadline) }
}

/// Waits, parked, until one of `fds` is ready or `deadline` passes; the
/// answer (`revents`, the count) always from the kernel.
///
/// # Safety
///
/// As poll(2): `fds` points to `nfds` valid `pollfd`s.
pub(super) unsafe fn poll_until(
    core: &Core,
    fds: *mut pollfd,
    nfds: nfds_t,
    deadline: Option<u64>,
) -> isize {
    let since = interrupt::epoch();
    loop {
        // SAFETY: the caller's contract.
        let ready = unsafe { sys::poll_now(fds, nfds) };
        if ready != 0 {
            return ready; // ready, or an error
        }
        let watched = (0..nfds as usize).filter_map(|i| {
            // SAFETY: the caller's contract; a copy of the two fields we
            // read, not a reference into memory the kernel writes.
            let (fd, events) = unsafe {
                let p = fds.add(i);
                ((*p).fd, (*p).events)
            };
            // poll(2) ignores a negative fd.
            (fd >= 0).then(|| (fd, interest(events)))
        });
        match wait::fds(core, watched, deadline, since) {
            Waited::Woken => {}
            // The kernel says which fds are ready and the count: 0 or more.
            // SAFETY: the caller's contract.
            Waited::TimedOut => return unsafe { sys::poll_now(fds, nfds) },
            // An fd epoll cannot watch: let the kernel wait, for what is
            // left of the timeout.
            // SAFETY: the caller's contract.
            Waited::Unwatchable => return unsafe { real(fds, nfds, wait::ms_left(deadline)) },
            w => return -(w.errno(0) as isize),
        }
    }
}

/// The reactor interest that covers a pollfd's events: `POLLPRI` (TCP
/// urgent data) is priority, which epoll reports only when asked for it.
/// An fd asked for none of them (only errors and hang-ups, which poll(2)
/// always reports) is watched for reading, which epoll reports them with.
fn interest(events: i16) -> Interest {
    let read = libc::POLLIN | libc::POLLRDNORM | libc::POLLRDBAND;
    let write = libc::POLLOUT | libc::POLLWRNORM | libc::POLLWRBAND;
    let mut interest = Interest::EMPTY;
    if events & read != 0 {
        interest = interest | Interest::READABLE;
    }
    if events & write != 0 {
        interest = interest | Interest::WRITABLE;
    }
    if events & libc::POLLPRI != 0 {
        interest = interest | Interest::PRIORITY;
    }
    if interest.is_empty() {
        Interest::READABLE
    } else {
        interest
    }
}
