//! Parking from inside a hook: fibra's park and reactor, without unwinding.
//!
//! A hook is an `extern "C"` function called by code (std's, a C
//! library's) that declared it cannot unwind, so the cancellation and
//! `fibra::timeout` unwinds of `runtime::park` must not start here. A
//! hooked call that would wait in a cancelled fiber, or past its
//! `fibra::timeout`, fails instead (`ECANCELED`, `ETIMEDOUT`); the fiber
//! unwinds at its next fibra park point.

use libc::c_int;

use crate::io::Interest;
use crate::runtime::core::{Core, Wake};
use crate::runtime::park::WaitOn;
use crate::time::clock;

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
}

impl Waited {
    /// The errno a hooked call fails with after this wait, if it fails.
    pub(super) fn errno(self, timed_out: c_int) -> c_int {
        match self {
            Waited::TimedOut => timed_out,
            Waited::Cancelled => libc::ECANCELED,
            _ => libc::ETIMEDOUT,
        }
    }
}

/// Parks the current context until woken or `deadline`, as
/// `runtime::park::park` does, but reporting cancellation and an expired
/// `fibra::timeout` instead of unwinding.
pub(super) fn park(core: &Core, deadline: Option<u64>, on: WaitOn) -> Waited {
    if core.current_is_unwinding() {
        // A destructor's call during an unwind: wait plainly, as fibra does.
        return match core.park_unwinding(deadline, on) {
            Wake::TimedOut => Waited::TimedOut,
            _ => Waited::Woken,
        };
    }
    let (cancelled, scope) = {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { core.local() };
        let rec = l.running();
        (rec.flags.cancelled(), rec.timeout)
    };
    if cancelled {
        return Waited::Cancelled;
    }
    if scope.is_some_and(|s| s.deadline <= clock::now_ns()) {
        return Waited::Expired;
    }
    let effective = match (deadline, scope) {
        (Some(d), Some(s)) => Some(d.min(s.deadline)),
        (d, s) => d.or(s.map(|s| s.deadline)),
    };
    match core.park_raw(effective, on) {
        Wake::Unparked => Waited::Woken,
        Wake::Cancelled => Waited::Cancelled,
        Wake::TimedOut => match scope {
            Some(s) if deadline.is_none_or(|d| s.deadline <= d) => Waited::Expired,
            _ => Waited::TimedOut,
        },
    }
}

/// Waits for socket `fd` (hook uid `uid`) to be ready for `interest`, with
/// the socket's registration that stays until the fd is closed.
pub(super) fn socket(
    core: &Core,
    fd: c_int,
    uid: u64,
    interest: Interest,
    deadline: Option<u64>,
) -> Waited {
    let token = core.current_token();
    let mut stale = Vec::new();
    let registered = {
        // SAFETY: on the runtime's thread; the borrow ends with this block
        // and runs no user code (the reactor only makes syscalls).
        let reactor = &mut unsafe { core.local() }.reactor;
        reactor
            .socket(fd, uid, &mut stale)
            .map(|key| reactor.add_socket_waiter(key, interest, token))
    };
    // No borrow is live: a wake may run a tracing subscriber. The waiters
    // of a stale source are woken even when registering failed.
    for t in stale {
        core.wake(t, Wake::Unparked);
    }
    let Ok(waiting) = registered else {
        return Waited::Unwatchable;
    };
    let waited = park(core, deadline, WaitOn::Fd(fd, interest));
    // SAFETY: on the runtime's thread; short borrow. No unwind can skip
    // this: `park` above does not unwind.
    unsafe { core.local() }.reactor.remove_waiter(waiting);
    waited
}

/// Forgets socket `fd`'s registration (hook uid `uid`) in the runtime of
/// this thread, before the fd is closed; its waiters (other fibers blocked
/// on the fd) are woken and find the fd closed.
pub(super) fn forget(core: &Core, fd: c_int, uid: u64) {
    let mut waiters = Vec::new();
    // SAFETY: on the runtime's thread; the borrow ends in this statement
    // and runs no user code.
    unsafe { core.local() }
        .reactor
        .deregister_socket(fd, uid, &mut waiters);
    // No borrow is live: a wake may run a tracing subscriber.
    for token in waiters {
        core.wake(token, Wake::Unparked);
    }
}
