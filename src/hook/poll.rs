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
use crate::scheduler::readiness::FdWaiter;
use crate::scheduler::wait_on::WaitOn;
use crate::timer::clock;

/// poll(2).
///
/// # Safety
///
/// As poll(2): `fds` points to `nfds` valid `pollfd`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn poll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    if timeout != 0
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
    // SAFETY: the caller's contract.
    let ready = unsafe { sys::poll_now(fds, nfds) };
    if ready != 0 {
        return ready; // ready, or an error
    }
    let deadline = u64::try_from(timeout)
        .ok()
        .map(|ms| clock::now_ns().saturating_add(ms * 1_000_000));
    let mut waiters: Vec<FdWaiter<'_>> = Vec::new();
    loop {
        let mut on = WaitOn::Sleep;
        let mut watchable = true;
        for i in 0..nfds as usize {
            // SAFETY: the caller's contract; a copy of the two fields we
            // read, not a reference into memory the kernel writes.
            let (fd, events) = unsafe {
                let p = fds.add(i);
                ((*p).fd, (*p).events)
            };
            if fd < 0 {
                continue; // poll(2) ignores it
            }
            let interest = interest(events);
            on = WaitOn::Fd(fd, interest);
            match FdWaiter::fd(core, fd, interest) {
                Ok(Some(waiter)) => waiters.push(waiter),
                _ => {
                    watchable = false;
                    break;
                }
            }
        }
        let waited = if watchable {
            wait::park(core, deadline, on)
        } else {
            Waited::Unwatchable
        };
        waiters.clear(); // each waiter is removed as it drops
        if waited == Waited::Unwatchable {
            // An fd epoll cannot watch: let the kernel wait, for what is
            // left of the timeout.
            let left = match deadline {
                None => -1,
                Some(d) => d.saturating_sub(clock::now_ns()).div_ceil(1_000_000) as c_int,
            };
            // SAFETY: the caller's contract.
            return unsafe { real(fds, nfds, left) };
        }
        // SAFETY: the caller's contract.
        let ready = unsafe { sys::poll_now(fds, nfds) };
        if ready != 0 {
            return ready;
        }
        match waited {
            Waited::Woken => {}
            Waited::TimedOut => return 0,
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
