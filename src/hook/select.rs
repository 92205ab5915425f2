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
use crate::scheduler::interrupt;
use crate::timer::clock;

/// The fds `select` can name (`FD_SETSIZE`); a call with more goes to the
/// kernel (see [`Sets`]).
const SETSIZE: c_int = 1024;
/// The words of a set of `SETSIZE` fds.
const SET_WORDS: usize = SETSIZE as usize / 64;

/// select(2), as glibc's: a timeout with a negative part fails with
/// `EINVAL`, one of a million microseconds or more is normalized, and the
/// time left is written back (on a timeout: zero).
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
    let tv = unsafe { timeout.as_ref() }.copied();
    let mut ts = match tv {
        Some(tv) if tv.tv_sec < 0 || tv.tv_usec < 0 => {
            sys::set_errno(libc::EINVAL);
            return -1;
        }
        Some(tv) => {
            let (sec, usec) = (tv.tv_usec / 1_000_000, tv.tv_usec % 1_000_000);
            Some(timespec {
                tv_sec: tv.tv_sec.saturating_add(sec),
                tv_nsec: usec * 1000,
            })
        }
        None => None,
    };
    let tsp = ts
        .as_mut()
        .map_or(std::ptr::null_mut(), |t| t as *mut timespec);
    // SAFETY: the caller's sets; our copy of the timeout, which the kernel
    // (or `pselect_parked`) updates with the time left.
    let n = unsafe { pselect_parked(nfds, [r, w, e], tsp, true) };
    // SAFETY: null or the caller's valid timeval.
    if let (Some(out), Some(ts)) = (unsafe { timeout.as_mut() }, ts) {
        out.tv_sec = ts.tv_sec;
        out.tv_usec = (ts.tv_nsec / 1000) as libc::suseconds_t;
    }
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
    // The kernel writes the time left into the timespec: give it a copy.
    // SAFETY: the caller's contract: null or a valid timespec.
    let mut ts = unsafe { timeout.as_ref() }.copied();
    let tsp = ts
        .as_mut()
        .map_or(std::ptr::null_mut(), |t| t as *mut timespec);
    if sigmask.is_null() {
        // SAFETY: the caller's sets, our copy of the timeout.
        return sys::ret(unsafe { pselect_parked(nfds, [r, w, e], tsp, false) }) as c_int;
    }
    // SAFETY: the caller's sets and mask, our copy of the timeout.
    sys::ret(unsafe { pselect_kernel(nfds, [r, w, e], tsp, sigmask) }) as c_int
}

/// The kernel's `pselect6`, with a signal mask or none.
///
/// # Safety
///
/// As pselect(2); `timeout` is ours to have written.
unsafe fn pselect_kernel(
    nfds: c_int,
    sets: [*mut fd_set; 3],
    timeout: *mut timespec,
    sigmask: *const sigset_t,
) -> isize {
    // The kernel's sixth argument: the mask and its size (8 bytes).
    let mask = [sigmask as usize, 8];
    let maskp = if sigmask.is_null() {
        0
    } else {
        mask.as_ptr() as usize
    };
    // SAFETY: the caller's contract; the mask's descriptor lives across
    // the call.
    unsafe {
        sys::call6(
            libc::SYS_pselect6,
            nfds as usize,
            sets[0] as usize,
            sets[1] as usize,
            sets[2] as usize,
            timeout as usize,
            maskp,
        )
    }
}

/// `pselect` with no mask: parked in a fiber (when the call may wait:
/// `0 <= nfds <= SETSIZE`, a timeout that is null or valid and not zero),
/// else the kernel's. `timeout` gets the time left, as the kernel writes
/// it (`select`), if `write_left`.
///
/// # Safety
///
/// As pselect(2); `timeout` is null or ours to write.
unsafe fn pselect_parked(
    nfds: c_int,
    sets: [*mut fd_set; 3],
    timeout: *mut timespec,
    write_left: bool,
) -> isize {
    if (0..=SETSIZE).contains(&nfds)
        // SAFETY: null or our valid copy.
        && let Some(deadline) = unsafe { wait::deadline_of(timeout) }
        && let Some(core) = super::parkable()
    {
        let start = clock::now_ns();
        // SAFETY: the caller's contract.
        let n = unsafe { select_until(core, nfds as usize, sets, deadline) };
        // SAFETY: null or our copy.
        if write_left && let Some(ts) = unsafe { timeout.as_mut() } {
            // The timeout less the time taken (not the deadline less now,
            // which saturates for a huge timeout), as the kernel writes it.
            let asked = i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec);
            let taken = i128::from(clock::now_ns().saturating_sub(start));
            let left = (asked - taken).max(0);
            ts.tv_sec = (left / 1_000_000_000) as libc::time_t;
            ts.tv_nsec = (left % 1_000_000_000) as libc::c_long;
        }
        return n;
    }
    // SAFETY: the caller's contract, passed to the kernel.
    unsafe { pselect_kernel(nfds, sets, timeout, std::ptr::null()) }
}

/// The three sets of a `select`, as many words of each as its `nfds`
/// needs (`ceil(nfds / 64)`): what the kernel reads and writes of the
/// caller's sets, and no more (a C event loop sizes its sets by its
/// highest fd, and one may end at the end of a page).
struct Sets {
    words: usize,
    asked: [[u64; SET_WORDS]; 3],
    /// Which of the caller's sets are not null.
    given: [bool; 3],
}

impl Sets {
    /// Copies the caller's sets.
    ///
    /// # Safety
    ///
    /// Each of `sets` is null or valid for `words` words (`words <=
    /// SET_WORDS`).
    unsafe fn copy(sets: [*mut fd_set; 3], words: usize) -> Sets {
        let mut asked = [[0u64; SET_WORDS]; 3];
        for (copy, &set) in asked.iter_mut().zip(&sets) {
            if !set.is_null() {
                // SAFETY: the caller's contract; a byte copy, whatever the
                // set's alignment.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        set.cast::<u8>(),
                        copy.as_mut_ptr().cast::<u8>(),
                        words * 8,
                    )
                };
            }
        }
        Sets {
            words,
            asked,
            given: sets.map(|s| !s.is_null()),
        }
    }

    /// Whether `fd` is in set `i` as asked.
    fn has(&self, i: usize, fd: usize) -> bool {
        self.given[i] && self.asked[i][fd / 64] & (1 << (fd % 64)) != 0
    }

    /// Asks the kernel with a fresh copy of the sets and `timeout`
    /// (microseconds; `None`: no limit); on an answer (not an error), and
    /// if it found fds ready or is `last`, writes the sets it returns to
    /// the caller's, as the kernel would (a look that found nothing and
    /// is followed by a park leaves them as asked: a signal that ends the
    /// wait leaves them so).
    ///
    /// # Safety
    ///
    /// `sets` are the caller's sets [`Sets::copy`] was made from.
    unsafe fn look(
        &self,
        nfds: usize,
        sets: [*mut fd_set; 3],
        timeout: Option<u64>,
        last: bool,
    ) -> isize {
        let mut work = self.asked;
        let ptrs: [usize; 3] = std::array::from_fn(|i| {
            if self.given[i] {
                work[i].as_mut_ptr() as usize
            } else {
                0
            }
        });
        let mut tv = timeout.map(|us| timeval {
            tv_sec: (us / 1_000_000) as libc::time_t,
            tv_usec: (us % 1_000_000) as libc::suseconds_t,
        });
        let tvp = tv.as_mut().map_or(0, |t| t as *mut timeval as usize);
        // SAFETY: our sets of `nfds` fds (`words` words of each are read
        // and written) and our timeval.
        let n = unsafe { sys::call6(libc::SYS_select, nfds, ptrs[0], ptrs[1], ptrs[2], tvp, 0) };
        if n > 0 || (n == 0 && last) {
            for (i, &set) in sets.iter().enumerate() {
                if self.given[i] {
                    // SAFETY: the caller's set, valid for `words` words.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            work[i].as_ptr().cast::<u8>(),
                            set.cast::<u8>(),
                            self.words * 8,
                        )
                    };
                }
            }
        }
        n
    }
}

/// Waits, parked, until one of the fds of `sets` (read, write, except) is
/// ready or `deadline` passes; the answer always from the kernel, and the
/// caller's sets written only with it (an error leaves them alone).
///
/// # Safety
///
/// Each of `sets` is null or a valid set of `nfds` fds; `nfds <= SETSIZE`.
unsafe fn select_until(
    core: &Core,
    nfds: usize,
    sets: [*mut fd_set; 3],
    deadline: Option<u64>,
) -> isize {
    // SAFETY: the caller's contract.
    let asked = unsafe { Sets::copy(sets, nfds.div_ceil(64)) };
    // SAFETY: `asked` was copied from `sets`.
    let look = |timeout, last| unsafe { asked.look(nfds, sets, timeout, last) };
    let interests = [Interest::READABLE, Interest::WRITABLE, Interest::PRIORITY];
    let since = interrupt::epoch();
    loop {
        let n = look(Some(0), false);
        if n != 0 {
            return n;
        }
        let watched = (0..nfds).filter_map(|fd| {
            let mut interest = Interest::EMPTY;
            for (i, &want) in interests.iter().enumerate() {
                if asked.has(i, fd) {
                    interest = interest | want;
                }
            }
            (!interest.is_empty()).then_some((fd as c_int, interest))
        });
        match wait::fds(core, watched, deadline, since) {
            Waited::Woken => {}
            Waited::TimedOut => return look(Some(0), true),
            Waited::Unwatchable => {
                let left = deadline.map(|d| d.saturating_sub(clock::now_ns()).div_ceil(1000));
                return look(left, true);
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
        && let Some(core) = super::parkable()
        // SAFETY: the caller's contract: null or a valid timespec.
        && let Some(deadline) = unsafe { wait::deadline_of(timeout) }
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
    let since = interrupt::epoch();
    loop {
        let n = wait_ms(0);
        if n != 0 {
            return n;
        }
        match wait::fds(core, [(epfd, Interest::READABLE)], deadline, since) {
            Waited::Woken => {}
            Waited::TimedOut => return wait_ms(0),
            Waited::Unwatchable => return wait_ms(wait::ms_left(deadline)),
            w => return -(w.errno(0) as isize),
        }
    }
}
