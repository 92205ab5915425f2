//! `nanosleep` and `clock_nanosleep` (behind `std::thread::sleep`): the
//! fiber parks on the timer wheel.
//!
//! The sleep always lasts its full time, as std promises ("never less"):
//! a cancelled fiber, or one whose `fibra::timeout` expires, unwinds at its
//! next fibra park point after it.

use libc::{c_int, clockid_t, timespec};

use super::sys;
use crate::scheduler::core::Core;
use crate::scheduler::park::park_regardless;
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
        sleep_until(core, clock::now_ns().saturating_add(ns));
        return 0;
    }
    // SAFETY: the caller's contract, passed to the kernel.
    sys::ret(unsafe { sys::call(libc::SYS_nanosleep, &[req as usize, rem as usize]) }) as c_int
}

/// clock_nanosleep(2), for `CLOCK_MONOTONIC` and `CLOCK_REALTIME` (others
/// go to the kernel). Returns the error number, not -1.
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
        sleep_until(core, deadline);
        return 0;
    }
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

/// Parks until `deadline`, whatever wakes the fiber before.
fn sleep_until(core: &Core, deadline: u64) {
    if deadline <= clock::now_ns() {
        core.yield_now(); // as fibra::sleep(ZERO): let the others run
        return;
    }
    while clock::now_ns() < deadline {
        park_regardless(core, Some(deadline), WaitOn::Sleep);
    }
}
