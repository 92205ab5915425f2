//! Parking from inside a hook: fibra's park and reactor, without unwinding.
//!
//! A hook is an `extern "C"` function called by code (std's, a C
//! library's) that declared it cannot unwind, so the cancellation and
//! `fibra::timeout` unwinds of `scheduler::park` must not start here. A
//! hooked call that would wait in a cancelled fiber, or past its
//! `fibra::timeout`, fails instead (`ECANCELED`, `ETIMEDOUT`); the fiber
//! unwinds at its next fibra park point.

use libc::c_int;

use crate::io::Interest;
use crate::scheduler::core::Core;
use crate::scheduler::interrupt::{self, Epoch, Interrupted};
use crate::scheduler::park::{Halted, park_interruptible};
use crate::scheduler::readiness::{self, FdWaiter};
use crate::scheduler::wait_on::WaitOn;

/// How a wait in a hook ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Waited {
    /// Woken: ready, or maybe not (try again).
    Woken,
    /// The call's own deadline passed (a socket timeout).
    TimedOut,
    /// The fiber is cancelled.
    Cancelled,
    /// The fiber's `fibra::timeout` expired.
    Expired,
    /// The reactor cannot watch the fd: make the real, blocking call.
    Unwatchable,
    /// A signal handler ran on the thread since the call began to wait
    /// (see `scheduler::interrupt`).
    Interrupted(Interrupted),
}

impl Waited {
    /// The errno a hooked call fails with after this wait, if it fails.
    pub(super) fn errno(self, timed_out: c_int) -> c_int {
        match self {
            Waited::TimedOut => timed_out,
            Waited::Cancelled => libc::ECANCELED,
            Waited::Interrupted(_) => libc::EINTR,
            _ => libc::ETIMEDOUT,
        }
    }
}

impl From<Halted> for Waited {
    #[inline]
    fn from(halted: Halted) -> Waited {
        match halted {
            Halted::Woken => Waited::Woken,
            Halted::TimedOut => Waited::TimedOut,
            Halted::Cancelled => Waited::Cancelled,
            Halted::Expired => Waited::Expired,
        }
    }
}

/// Parks the current context until woken or `deadline`, as
/// `scheduler::park::park` does, but reporting cancellation and an expired
/// `fibra::timeout` instead of unwinding, and a signal handler that ran on
/// the thread since `since` (the call's start: a handler the kernel would
/// have run while it blocked) as `Interrupted`.
///
/// Inlined, so that the frames above the switch are the ones there were
/// when this function was `park_without_unwind` (see `Core::switch_to`).
#[inline(always)]
pub(super) fn park(core: &Core, deadline: Option<u64>, on: WaitOn, since: Epoch) -> Waited {
    if let Some(i) = interrupt::epoch().since(since) {
        return Waited::Interrupted(i); // (before the park: no switch)
    }
    let halted = park_interruptible(core, deadline, on);
    match interrupt::epoch().since(since) {
        Some(i) if halted == Halted::Woken => Waited::Interrupted(i),
        _ => halted.into(),
    }
}

/// Waits for socket `fd` (hook uid `uid`; or a pipe, tty, eventfd...) to be
/// ready for `interest`, with the fd's registration that stays until it is
/// closed; `since`: as [`park`].
pub(super) fn socket(
    core: &Core,
    fd: c_int,
    uid: u64,
    interest: Interest,
    deadline: Option<u64>,
    since: Epoch,
) -> Waited {
    let _errno = KeepErrno::new(); // (as in `fds`)
    // The waiters of a stale source are woken even when registering fails.
    let Ok(waiter) = FdWaiter::socket(core, fd, uid, interest) else {
        return Waited::Unwatchable;
    };
    let waited = park(core, deadline, WaitOn::Fd(fd, interest), since);
    // No unwind can skip this: `park` above does not unwind.
    drop(waiter);
    waited
}

/// Parks until one of `fds` may be ready for its interest (an event came
/// for it), or `deadline`: the wait of the hooked `poll`, `select` and
/// `epoll_wait`, whose callers then ask the kernel what is ready. Each fd
/// is registered for as long as the fiber parks, as `fibra::io::wait`
/// does. `Unwatchable` when one of them cannot be watched by epoll (a
/// regular file, say): the caller lets the kernel wait instead. With no fd
/// at all this is a sleep to `deadline`. `since`: as [`park`].
pub(super) fn fds(
    core: &Core,
    fds: impl IntoIterator<Item = (c_int, Interest)>,
    deadline: Option<u64>,
    since: Epoch,
) -> Waited {
    // The reactor's own calls (`epoll_ctl` on an fd it cannot watch, say)
    // must not leave their errno to the caller, whose call may succeed.
    let _errno = KeepErrno::new();
    let mut waiters: Vec<FdWaiter<'_>> = Vec::new();
    let mut on = WaitOn::Sleep;
    for (fd, interest) in fds {
        on = WaitOn::Fd(fd, interest);
        match FdWaiter::fd(core, fd, interest) {
            Ok(Some(waiter)) => waiters.push(waiter),
            _ => return Waited::Unwatchable, // (the waiters so far drop)
        }
    }
    let waited = park(core, deadline, on, since);
    // No unwind can skip this: `park` above does not unwind. Each waiter
    // is removed as it drops.
    drop(waiters);
    waited
}

/// Puts back, when dropped, the `errno` there was when it was made.
struct KeepErrno(c_int);

impl KeepErrno {
    fn new() -> KeepErrno {
        // SAFETY: this thread's errno, always valid.
        KeepErrno(unsafe { *libc::__errno_location() })
    }
}

impl Drop for KeepErrno {
    fn drop(&mut self) {
        super::sys::set_errno(self.0);
    }
}

/// What is left of `deadline`, in milliseconds rounded up, as the timeout
/// of a real call that waits in the kernel instead (-1: none).
pub(super) fn ms_left(deadline: Option<u64>) -> c_int {
    match deadline {
        None => -1,
        Some(d) => {
            let ms = d
                .saturating_sub(crate::timer::clock::now_ns())
                .div_ceil(1_000_000);
            c_int::try_from(ms).unwrap_or(c_int::MAX)
        }
    }
}

/// The deadline of a call's `timespec` timeout, relative to now: `None`
/// when the call is not to park (a zero timeout, which only looks, or an
/// invalid one, which the kernel refuses); `Some(None)` for a null
/// pointer, which waits for ever.
///
/// # Safety
///
/// `ts` is null or points to a timespec.
pub(super) unsafe fn deadline_of(ts: *const libc::timespec) -> Option<Option<u64>> {
    // SAFETY: the caller's contract.
    let Some(ts) = (unsafe { ts.as_ref() }) else {
        return Some(None);
    };
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return None;
    }
    let ns = (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64);
    (ns != 0).then(|| Some(crate::timer::clock::now_ns().saturating_add(ns)))
}

/// Forgets socket `fd`'s registration (hook uid `uid`) in the runtime of
/// this thread, before the fd is closed; its waiters (other fibers blocked
/// on the fd) are woken and find the fd closed.
pub(super) fn forget(core: &Core, fd: c_int, uid: u64) {
    readiness::deregister_socket(core, fd, uid);
}
