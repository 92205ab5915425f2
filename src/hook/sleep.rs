//! `nanosleep` and `clock_nanosleep` (behind `std::thread::sleep`): the
//! fiber parks on the timer wheel.
//!
//! The sleep lasts its full time, whatever wakes the fiber — a cancelled
//! fiber, or one whose `fibra::timeout` expires, unwinds at its next fibra
//! park point after it — unless a signal handler runs on the thread
//! meanwhile: then, as the kernel's sleep, it fails with `EINTR` and says
//! how much was left (`std::thread::sleep` sleeps the rest).

use libc::{c_int, clockid_t, timespec};

use super::sys;
use crate::scheduler::core::Core;
use crate::scheduler::interrupt;
use crate::scheduler::park::park_regardless_interruptible;
use crate::scheduler::wait_on::WaitOn;
use crate::timer::clock;

/// nanosleep(2).
///
/// # Safety
///
/// As nanosleep(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nanosleep(req: *const timespec, rem: *mut timespec) -> c_int {
    if let Some(core) = super::parkable()
        // SAFETY: the caller's contract.
        && let Some(ns) = unsafe { nanos(req) }
    {
        let Err(left) = sleep_until(core, clock::now_ns().saturating_add(ns)) else {
            return 0;
        };
        // SAFETY: the caller's contract: null or valid for writes.
        if let Some(rem) = unsafe { rem.as_mut() } {
            *rem = timespec_of(left);
        }
        sys::set_errno(libc::EINTR);
        return -1;
    }
    // SAFETY: the caller's contract, passed to the kernel.
    sys::ret(unsafe { sys::call(libc::SYS_nanosleep, &[req as usize, rem as usize]) }) as c_int
}

/// clock_nanosleep(2), for `CLOCK_MONOTONIC` and `CLOCK_REALTIME` (others
/// go to the kernel, as glibc hands them: `CLOCK_THREAD_CPUTIME_ID` is
/// refused, `CLOCK_PROCESS_CPUTIME_ID` is the process's own CPU clock).
/// Returns the error number, not -1.
///
/// # Safety
///
/// As clock_nanosleep(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clock_nanosleep(
    clock_id: clockid_t,
    flags: c_int,
    req: *const timespec,
    rem: *mut timespec,
) -> c_int {
    if (clock_id == libc::CLOCK_MONOTONIC || clock_id == libc::CLOCK_REALTIME)
        && let Some(core) = super::parkable()
        // SAFETY: the caller's contract.
        && let Some(ns) = unsafe { nanos(req) }
    {
        let now = clock::now_ns();
        let deadline = if flags & libc::TIMER_ABSTIME == 0 {
            now.saturating_add(ns)
        } else if clock_id == libc::CLOCK_MONOTONIC {
            ns
        } else {
            // A realtime instant, as the time from now until it.
            now.saturating_add(ns.saturating_sub(realtime_ns()))
        };
        let Err(left) = sleep_until(core, deadline) else {
            return 0;
        };
        if flags & libc::TIMER_ABSTIME == 0 {
            // SAFETY: the caller's contract: null or valid for writes.
            if let Some(rem) = unsafe { rem.as_mut() } {
                *rem = timespec_of(left);
            }
        }
        return libc::EINTR;
    }
    if clock_id == libc::CLOCK_THREAD_CPUTIME_ID {
        return libc::EINVAL; // (glibc's answer, whatever the kernel's)
    }
    let clock_id = if clock_id == libc::CLOCK_PROCESS_CPUTIME_ID {
        PROCESS_CPU_CLOCK
    } else {
        clock_id
    };
    // SAFETY: the caller's contract, passed to the kernel.
    let r = unsafe {
        sys::call(
            libc::SYS_clock_nanosleep,
            &[
                clock_id as usize,
                flags as usize,
                req as usize,
                rem as usize,
            ],
        )
    };
    if r < 0 { -r as c_int } else { 0 }
}

/// The CPU clock of the calling process, as the kernel names it
/// (`MAKE_PROCESS_CPUCLOCK(0, CPUCLOCK_SCHED)`), which glibc passes for
/// `CLOCK_PROCESS_CPUTIME_ID`.
const PROCESS_CPU_CLOCK: clockid_t = !0 << 3 | 2;

/// The nanoseconds of a valid timespec (else `None`: the kernel says
/// EINVAL or EFAULT).
///
/// # Safety
///
/// `req` is null or points to a timespec.
unsafe fn nanos(req: *const timespec) -> Option<u64> {
    // SAFETY: the caller's contract.
    let ts = unsafe { req.as_ref() }?;
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return None;
    }
    Some((ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64)
}

fn realtime_ns() -> u64 {
    let mut ts = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn timespec_of(ns: u64) -> timespec {
    timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// Parks until `deadline`, whatever wakes the fiber before, but a signal
/// handler that runs on the thread: then `Err` with the nanoseconds left.
fn sleep_until(core: &Core, deadline: u64) -> Result<(), u64> {
    if deadline <= clock::now_ns() {
        core.yield_now(); // as fibra::sleep(ZERO): let the others run
        return Ok(());
    }
    let since = interrupt::epoch();
    loop {
        let now = clock::now_ns();
        if now >= deadline {
            return Ok(());
        }
        if interrupt::epoch().since(since).is_some() {
            return Err(deadline - now);
        }
        park_regardless_interruptible(core, Some(deadline), WaitOn::Sleep);
    }
}
