//! `sigaction` and `signal`: every signal handler the process installs
//! runs marked as one, so that nothing it calls parks or touches the
//! scheduler.
//!
//! A signal interrupts its thread anywhere — in a fiber's code, or in the
//! middle of the scheduler while it holds its own state — and the handler
//! runs on top of that. A hooked call made in the handler must therefore
//! act exactly as the kernel's: never park the fiber (that would switch
//! away in the middle of whatever the signal interrupted, and run other
//! fibers with the signal blocked), never borrow the scheduler's state
//! (the interrupted code may hold it: aliasing). So the hooks of
//! `sigaction` and `signal` install, for every handler the user gives, a
//! trampoline of ours that calls it inside
//! [`callout`](crate::scheduler::callout::callout): while it runs,
//! [`parkable`](super::parkable) says no on this thread, and every hooked
//! call there goes straight to the kernel (a blocking socket call blocks
//! the thread, as it would without the hook).
//!
//! The user's view is unchanged: `sigaction`'s old action reports the
//! user's handler and flags, never the trampoline, so code that saves an
//! action and restores it later (std's stack-overflow handler, signal
//! chaining in C libraries) gets back what it installed. `SIG_DFL` and
//! `SIG_IGN` go to the kernel as they are.
//!
//! ## Limits
//!
//! - A handler installed behind libc's back (a raw `rt_sigaction` system
//!   call), or by `sigset`, `sysv_signal` or `bsd_signal`, is not wrapped:
//!   a hooked call in it may park. `signal` and `sigaction` are what std,
//!   the `libc` and `signal-hook` crates and C libraries use.
//! - A handler that leaves by `siglongjmp` instead of returning leaves its
//!   thread marked as in a handler: hooked calls there then block the
//!   thread (correct, never unsound, but no longer parked).
//!
//! Everything here is async-signal-safe: `sigaction` itself may be called
//! from a handler, and the trampoline runs in one (no allocation, lock or
//! lazily initialised state; the tables are atomics).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use libc::{c_int, c_void, sighandler_t, siginfo_t};

use super::sys;
use crate::scheduler::callout::callout;
use crate::scheduler::park::signal_handled;
use crate::scheduler::stack_trace::signal as sample_signal;

/// Signal numbers are below this (`_NSIG` on Linux).
const NSIG: usize = 65;

/// The user's handler of each signal that has the trampoline installed
/// (its `sa_sigaction`, a function address).
static HANDLERS: [AtomicUsize; NSIG] = [const { AtomicUsize::new(0) }; NSIG];
/// Bit `n`: the user's handler of signal `n` takes three arguments
/// (`SA_SIGINFO`); the trampoline always does.
static WANTS_INFO: AtomicU64 = AtomicU64::new(0);
/// Bit `n`: the user's handler of signal `n` was installed with
/// `SA_RESTART` (the trampoline's flags say so too, for the kernel's own
/// calls); a call parked in a hook restarts after it, as the kernel's.
static RESTARTS: AtomicU64 = AtomicU64::new(0);
/// Bit `n`: the kernel's action for signal `n` was last set by this module
/// with an `SA_SIGINFO` the user did not ask for (the trampoline's), which
/// an action read back must not show, even once `SA_RESETHAND` has reset
/// the handler.
static ADDED_INFO: AtomicU64 = AtomicU64::new(0);
/// Bit `n`: `siginterrupt(n, 1)` was called last, so [`signal`] installs a
/// handler of `n` without `SA_RESTART`, as glibc's does.
static INTERRUPTS: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" {
    /// glibc's own `sigaction`, which this module's hook replaces for
    /// everyone else (exported by glibc as `__sigaction` since 2.2.5).
    fn __sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
}

type Handler1 = extern "C" fn(c_int);
type Handler3 = extern "C" fn(c_int, *mut siginfo_t, *mut c_void);

/// What the kernel calls for every wrapped handler: the user's handler,
/// counted as a callout, so hooked calls in it never park.
extern "C" fn trampoline(sig: c_int, info: *mut siginfo_t, ctx: *mut c_void) {
    let Some(index) = index(sig) else { return };
    let handler = HANDLERS[index].load(Ordering::Acquire);
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        return; // (only in a race with a change of the action)
    }
    let wants_info = WANTS_INFO.load(Ordering::Relaxed) & (1 << index) != 0;
    let restart = RESTARTS.load(Ordering::Relaxed) & (1 << index) != 0;
    callout(|| {
        if wants_info {
            // SAFETY: stored by `sigaction` from a user's action whose
            // `sa_sigaction` is a handler of the SA_SIGINFO form (its
            // flags said so); called as the kernel would have.
            let f = unsafe { std::mem::transmute::<usize, Handler3>(handler) };
            f(sig, info, ctx);
        } else {
            // SAFETY: as above, of the one-argument form.
            let f = unsafe { std::mem::transmute::<usize, Handler1>(handler) };
            f(sig);
        }
    });
    // A handler ran on this thread: a hooked call parked here ends as the
    // kernel's would (`scheduler::interrupt`). Not for fibra's own stack
    // sampler, which only fibra sends, and which must change nothing.
    if sig != sample_signal() {
        signal_handled(restart);
    }
}

fn index(sig: c_int) -> Option<usize> {
    usize::try_from(sig).ok().filter(|&s| s > 0 && s < NSIG)
}

/// Whether `handler` is one the kernel runs (not `SIG_DFL`, `SIG_IGN`).
fn is_function(handler: sighandler_t) -> bool {
    handler != libc::SIG_DFL && handler != libc::SIG_IGN && handler != libc::SIG_ERR
}

/// sigaction(2).
///
/// # Safety
///
/// As sigaction(2): `act` and `old` are null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let Some(index) = index(sig) else {
        // SAFETY: the caller's contract; glibc says EINVAL.
        return unsafe { __sigaction(sig, act, old) };
    };
    // What the trampoline stood for until now, for `old`.
    let was = HANDLERS[index].load(Ordering::Acquire);
    let was_info = WANTS_INFO.load(Ordering::Relaxed) & (1 << index) != 0;
    let was_added = ADDED_INFO.load(Ordering::Relaxed) & (1 << index) != 0;
    // SAFETY: `act` is null or valid (the caller's contract).
    let wrapped = match unsafe { act.as_ref() } {
        Some(a) if is_function(a.sa_sigaction) => {
            let mut ours = *a;
            HANDLERS[index].store(a.sa_sigaction, Ordering::Release);
            let bit = 1u64 << index;
            if a.sa_flags & libc::SA_SIGINFO != 0 {
                WANTS_INFO.fetch_or(bit, Ordering::Relaxed);
            } else {
                WANTS_INFO.fetch_and(!bit, Ordering::Relaxed);
            }
            if a.sa_flags & libc::SA_RESTART != 0 {
                RESTARTS.fetch_or(bit, Ordering::Relaxed);
            } else {
                RESTARTS.fetch_and(!bit, Ordering::Relaxed);
            }
            ours.sa_sigaction = trampoline as *const () as sighandler_t;
            ours.sa_flags |= libc::SA_SIGINFO;
            Some(ours)
        }
        _ => None,
    };
    if !act.is_null() {
        let bit = 1u64 << index;
        match &wrapped {
            Some(_) if !was_info_of(index) => {
                ADDED_INFO.fetch_or(bit, Ordering::Relaxed);
            }
            _ => {
                ADDED_INFO.fetch_and(!bit, Ordering::Relaxed);
            }
        }
    }
    let act = wrapped
        .as_ref()
        .map_or(act, |a| a as *const libc::sigaction);
    // SAFETY: `act` is the caller's or our copy of it; `old` the caller's.
    let r = unsafe { __sigaction(sig, act, old) };
    if r != 0 {
        return r;
    }
    // SAFETY: `old` is null or valid (the caller's contract), and was just
    // written by the successful call.
    let old = unsafe { old.as_mut() };
    if let Some(old) = old {
        if old.sa_sigaction == trampoline as *const () as sighandler_t {
            old.sa_sigaction = was;
            if !was_info {
                old.sa_flags &= !libc::SA_SIGINFO;
            }
        } else if was_added && !is_function(old.sa_sigaction) {
            // Reset by the kernel (`SA_RESETHAND`) after a delivery: the
            // flags are still the trampoline's.
            old.sa_flags &= !libc::SA_SIGINFO;
        }
    }
    r
}

/// Whether the user's handler of signal `index`, as now recorded, takes
/// three arguments.
fn was_info_of(index: usize) -> bool {
    WANTS_INFO.load(Ordering::Relaxed) & (1 << index) != 0
}

/// signal(3), with glibc's (BSD) semantics: the handler stays installed,
/// interrupted system calls restart, the signal is blocked while its
/// handler runs.
///
/// # Safety
///
/// As signal(3): `handler` is `SIG_DFL`, `SIG_IGN` or a handler.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn signal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    let Some(index) = index(sig).filter(|_| handler != libc::SIG_ERR) else {
        sys::set_errno(libc::EINVAL);
        return libc::SIG_ERR;
    };
    // SAFETY: all-zero is a valid sigaction (an empty mask, no flags).
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    // As glibc's: restarting, unless `siginterrupt` said otherwise.
    if INTERRUPTS.load(Ordering::Relaxed) & (1 << index) == 0 {
        act.sa_flags = libc::SA_RESTART;
    }
    // SAFETY: `act.sa_mask` is a valid sigset; `sig` is in range.
    unsafe { libc::sigaddset(&mut act.sa_mask, sig) };
    // SAFETY: all-zero is a valid sigaction, written by the call.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: both point to valid sigactions.
    if unsafe { sigaction(sig, &act, &mut old) } < 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

/// siginterrupt(3): whether a handler of `sig` interrupts system calls
/// (`flag` nonzero: it does, `SA_RESTART` off). glibc's changes the
/// action behind libc's entry point (`__sigaction`), which this module
/// would not see; this one goes through [`sigaction`], so calls parked in
/// hooks follow it too.
///
/// # Safety
///
/// As siginterrupt(3).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn siginterrupt(sig: c_int, flag: c_int) -> c_int {
    let Some(index) = index(sig) else {
        sys::set_errno(libc::EINVAL);
        return -1;
    };
    // SAFETY: all-zero is a valid sigaction, written by the call.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a valid sigaction to read the current action into.
    if unsafe { sigaction(sig, std::ptr::null(), &mut action) } < 0 {
        return -1;
    }
    if flag != 0 {
        INTERRUPTS.fetch_or(1 << index, Ordering::Relaxed);
        action.sa_flags &= !libc::SA_RESTART;
    } else {
        INTERRUPTS.fetch_and(!(1 << index), Ordering::Relaxed);
        action.sa_flags |= libc::SA_RESTART;
    }
    // SAFETY: the action just read, changed in its flags only.
    unsafe { sigaction(sig, &action, std::ptr::null_mut()) }
}
