//! The waits of C event loops: `select`, `pselect`, `epoll_wait`,
//! `epoll_pwait` and `epoll_pwait2` park the fiber on the fds and the
//! deadline (`poll` and `ppoll` are in `poll`).
//!
//! Each asks the kernel first with a zero timeout; if nothing is ready,
//! the fiber parks on the fds in the reactor (an epoll fd is itself
//! pollable: readable when one of its fds is ready), and asks again after
//! every wake-up, so the answer is always the kernel's. A call with a
//! signal mask goes to the kernel: it sets the mask for the wait alone,
//! atomically, which a parked fiber cannot do (the thread's other fibers
//! would run with it).
//!
//! An embedded event loop that keeps its state in thread-locals — tokio's
//! runtime inside the sync `postgres` crate, say — parks too: then a second
//! fiber of the thread that enters the same kind of loop while the first
//! waits finds the first's state in the thread-local (tokio panics:
//! "Cannot start a runtime from within a runtime"). Give such a client a
//! thread of its own (`fibra::spawn_blocking`), or use its async form on
//! fibra's reactor.

use libc::{c_int, epoll_event, fd_set, sigset_t, timespec, timeval};

use super::sys;
use super::wait::{self, Waited};
use crate::io::Interest;
use crate::scheduler::core::Core;
use crate::timer::clock;

/// The fds `select` can name (`FD_SETSIZE`).
const SETSIZE: c_int = 1024;

/// select(2). On a timeout the sets are cleared and `timeout` is zero; on
/// success `timeout` holds the time left, as Linux's select does.
///
/// # Safety
///
/// As select(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn select(
    nfds: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    timeout: *mut timeval,
) -> c_int {
    // SAFETY: the caller's contract: null or a valid timeval.
    let ts = unsafe { timeout.as_ref() }.map(|tv| timespec {
        tv_sec: tv.tv_sec,
        tv_nsec: if (0..1_000_000).contains(&tv.tv_usec) {
            tv.tv_usec * 1000
        } else {
            -1
        },
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const timespec);
    if (0..=SETSIZE).contains(&nfds)
        // SAFETY: null or our valid copy.
        && let Some(deadline) = unsafe { wait::deadline_of(tsp) }
        && let Some(core) = super::parkable()
    {
        // SAFETY: the caller's contract.
        let n = unsafe { select_until(core, nfds, [r, w, e], deadline) };
        // SAFETY: null or the caller's valid timeval.
        if let Some(tv) = unsafe { timeout.as_mut() } {
            let left = deadline.map_or(0, |d| d.saturating_sub(clock::now_ns()));
            tv.tv_sec = (left / 1_000_000_000) as libc::time_t;
            tv.tv_usec = ((left % 1_000_000_000) / 1000) as libc::suseconds_t;
        }
        return sys::ret(n) as c_int;
    }
    // SAFETY: the caller's contract, passed to the kernel.
    let n = unsafe {
        sys::call6(
            libc::SYS_select,
            nfds as usize,
            r as usize,
            w as usize,
            e as usize,
            timeout as usize,
            0,
        )
    };
    sys::ret(n) as c_int
}

/// pselect(2): as `select`, with a `timespec` it leaves alone; with a
/// signal mask the kernel waits (see the module docs).
///
/// # Safety
///
/// As pselect(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pselect(
    nfds: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    timeout: *const timespec,
    sigmask: *const sigset_t,
) -> c_int {
    if sigmask.is_null()
        && (0..=SETSIZE).contains(&nfds)
        // SAFETY: the caller's contract: null or a valid timespec.
        && let Some(deadline) = unsafe { wait::deadline_of(timeout) }
        && let Some(core) = super::parkable()
    {
        // SAFETY: the caller's contract.
        return sys::ret(unsafe { select_until(core, nfds, [r, w, e], deadline) }) as c_int;
    }
    // The kernel writes the time left into the timespec: give it a copy.
    // SAFETY: the caller's contract: null or a valid timespec.
    let mut ts = unsafe { timeout.as_ref() }.copied();
    let tsp = ts
        .as_mut()
        .map_or(std::ptr::null_mut(), |t| t as *mut timespec);
    // The kernel's sixth argument: the mask and its size (8 bytes).
    let mask = [sigmask as usize, 8];
    let maskp = if sigmask.is_null() {
        0
    } else {
        mask.as_ptr() as usize
    };
    // SAFETY: the caller's sets and mask, our copy of the timeout and the
    // mask's descriptor, all valid for the call.
    let n = unsafe {
        sys::call6(
            libc::SYS_pselect6,
            nfds as usize,
            r as usize,
            w as usize,
            e as usize,
            tsp as usize,
            maskp,
        )
    };
    sys::ret(n) as c_int
}

/// Waits, parked, until one of the fds of `sets` (read, write, except) is
/// ready or `deadline` passes; the answer always from the kernel.
///
/// # Safety
///
/// Each of `sets` is null or a valid `fd_set`; `nfds <= SETSIZE`.
unsafe fn select_until(
    core: &Core,
    nfds: c_int,
    sets: [*mut fd_set; 3],
    deadline: Option<u64>,
) -> isize {
    // The sets as the caller gave them: a select rewrites them.
    // SAFETY: the caller's contract.
    let asked = sets.map(|s| unsafe { s.as_ref() }.copied());
    let look = |timeout: Option<&mut timeval>| {
        for (set, copy) in sets.iter().zip(&asked) {
            if let Some(copy) = copy {
                // SAFETY: the caller's valid set.
                unsafe { **set = *copy };
            }
        }
        let tv = timeout.map_or(0, |t| t as *mut timeval as usize);
        // SAFETY: the caller's sets; a valid timeval or null.
        unsafe {
            sys::call6(
                libc::SYS_select,
                nfds as usize,
                sets[0] as usize,
                sets[1] as usize,
                sets[2] as usize,
                tv,
                0,
            )
        }
    };
    let now = || {
        let mut zero = timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        look(Some(&mut zero))
    };
    let interests = [Interest::READABLE, Interest::WRITABLE, Interest::PRIORITY];
    loop {
        let n = now();
        if n != 0 {
            return n;
        }
        let watched = (0..nfds).filter_map(|fd| {
            let mut interest = Interest::EMPTY;
            for (copy, &i) in asked.iter().zip(&interests) {
                let asked_for = |s: &fd_set| {
                    // SAFETY: `fd < nfds <= SETSIZE`: inside the set.
                    unsafe { libc::FD_ISSET(fd, s) }
                };
                if copy.as_ref().is_some_and(asked_for) {
                    interest = interest | i;
                }
            }
            (!interest.is_empty()).then_some((fd, interest))
        });
        match wait::fds(core, watched, deadline) {
            Waited::Woken => {}
            Waited::TimedOut => return now(),
            Waited::Unwatchable => {
                let ms = wait::ms_left(deadline);
                let mut left = timeval {
                    tv_sec: (ms / 1000) as libc::time_t,
                    tv_usec: ((ms % 1000) * 1000) as libc::suseconds_t,
                };
                return look((ms >= 0).then_some(&mut left));
            }
            w => return -(w.errno(0) as isize),
        }
    }
}

/// epoll_wait(2).
///
/// # Safety
///
/// As epoll_wait(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { epoll_pwait(epfd, events, max, timeout, std::ptr::null()) }
}

/// epoll_pwait(2); with a signal mask the kernel waits (see the module
/// docs).
///
/// # Safety
///
/// As epoll_pwait(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    sigmask: *const sigset_t,
) -> c_int {
    if timeout != 0
        && sigmask.is_null()
        && let Some(core) = super::parkable()
    {
        let deadline = u64::try_from(timeout)
            .ok()
            .map(|ms| clock::now_ns().saturating_add(ms * 1_000_000));
        // SAFETY: the caller's contract.
        return sys::ret(unsafe { epoll_until(core, epfd, events, max, deadline) }) as c_int;
    }
    // SAFETY: the caller's contract.
    let n = unsafe {
        epoll_kernel(
            libc::SYS_epoll_pwait,
            epfd,
            events,
            max,
            timeout as usize,
            sigmask,
        )
    };
    sys::ret(n) as c_int
}

/// epoll_pwait2(2): epoll_pwait with a `timespec`.
///
/// # Safety
///
/// As epoll_pwait2(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: *const timespec,
    sigmask: *const sigset_t,
) -> c_int {
    if sigmask.is_null()
        // SAFETY: the caller's contract: null or a valid timespec.
        && let Some(deadline) = unsafe { wait::deadline_of(timeout) }
        && let Some(core) = super::parkable()
    {
        // SAFETY: the caller's contract.
        return sys::ret(unsafe { epoll_until(core, epfd, events, max, deadline) }) as c_int;
    }
    // SAFETY: the caller's contract.
    let n = unsafe {
        epoll_kernel(
            libc::SYS_epoll_pwait2,
            epfd,
            events,
            max,
            timeout as usize,
            sigmask,
        )
    };
    sys::ret(n) as c_int
}

/// The kernel's `epoll_pwait` or `epoll_pwait2` (`n`): `timeout` is the
/// milliseconds or the timespec pointer, as `n` takes it.
///
/// # Safety
///
/// As epoll_pwait(2): `events` valid for `max` events, `timeout` and
/// `sigmask` as the call takes them.
unsafe fn epoll_kernel(
    n: libc::c_long,
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: usize,
    sigmask: *const sigset_t,
) -> isize {
    // SAFETY: the caller's contract, passed to the kernel (the size of
    // the kernel's sigset: 8 bytes).
    unsafe {
        sys::call6(
            n,
            epfd as usize,
            events as usize,
            max as usize,
            timeout,
            sigmask as usize,
            8,
        )
    }
}

/// Waits, parked, until epoll fd `epfd` has events or `deadline` passes.
///
/// # Safety
///
/// `events` is valid for `max` events.
unsafe fn epoll_until(
    core: &Core,
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    deadline: Option<u64>,
) -> isize {
    let wait_ms = |ms: c_int| {
        // SAFETY: the caller's contract; no signal mask.
        unsafe {
            let null = std::ptr::null();
            epoll_kernel(
                libc::SYS_epoll_pwait,
                epfd,
                events,
                max,
                ms as isize as usize,
                null,
            )
        }
    };
    loop {
        let n = wait_ms(0);
        if n != 0 {
            return n;
        }
        match wait::fds(core, [(epfd, Interest::READABLE)], deadline) {
            Waited::Woken => {}
            Waited::TimedOut => return wait_ms(0),
            Waited::Unwatchable => return wait_ms(wait::ms_left(deadline)),
            w => return -(w.errno(0) as isize),
        }
    }
}
