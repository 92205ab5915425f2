//! The one primitive everything blocking stands on: park the current
//! context; an [`Unparker`] (`unparker.rs`, re-exported here) wakes it from
//! anywhere.
//!
//! In a fiber (or `block_on`'s closure) parking switches to other fibers; on
//! a plain thread it blocks the thread. Callers never rely on a wake-up
//! meaning anything: they re-check their condition and park again, exactly as
//! with `std::thread::park`.
//!
//! Parks in a fiber are where cancellation and `fibra::timeout` take effect:
//! [`park`] unwinds the fiber (with a private payload, caught at the fiber's
//! root or by `timeout`) when it has been cancelled or its timeout expired.
//! While a fiber is already unwinding, its parks are ordinary parks, so a
//! destructor that blocks does block instead of aborting the process with a
//! panic inside a panic.

use std::num::NonZeroU64;
use std::panic::{self, AssertUnwindSafe};

use crate::scheduler::context;
use crate::scheduler::core::Core;
use crate::scheduler::core::record::{TimeoutScope, Wake};
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::os_thread;
use crate::scheduler::owner;
pub(crate) use crate::scheduler::unparker::{RawUnparker, Unparker};
use crate::scheduler::wait_on::WaitOn;
use crate::stack::pin::StackPin;
use crate::timer::clock;

/// The unwind payload of a cancelled fiber.
///
/// Dropped, it says that the unwind it carried has ended: caught, by the
/// fiber's end or by the fiber's own `catch_unwind`. Then the fiber is no
/// longer unwinding (its record's flag is cleared, if it is the running
/// one), and its next park is a cancellation point again. The flag could
/// not tell otherwise while another context of the thread is suspended
/// mid-unwind: the thread's panic count, which `std::thread::panicking`
/// reads, is then above zero for every context of it.
pub(crate) struct CancelUnwind {
    /// The fiber it unwinds; `None` for a report only (of a fiber
    /// cancelled before it ran).
    fiber: Option<FiberId>,
}

impl CancelUnwind {
    /// The payload that unwinds the running context of `core`.
    fn unwinding(core: &Core) -> Box<CancelUnwind> {
        Box::new(CancelUnwind {
            fiber: Some(core.current_id()),
        })
    }

    /// A payload for a report only: it unwinds nothing.
    pub(crate) fn report() -> Box<CancelUnwind> {
        Box::new(CancelUnwind { fiber: None })
    }
}

impl Drop for CancelUnwind {
    fn drop(&mut self) {
        if let Some(id) = self.fiber {
            unwind_caught(id);
        }
    }
}

/// The unwind payload of an expired `fibra::timeout` (dropped: as
/// [`CancelUnwind`]).
struct TimeoutUnwind {
    id: NonZeroU64,
    fiber: FiberId,
}

impl Drop for TimeoutUnwind {
    fn drop(&mut self) {
        unwind_caught(self.fiber);
    }
}

/// An unwind of fiber `id` ended (its payload is dropped): if `id` is the
/// context running on this thread, it no longer unwinds. (A payload moved
/// to another fiber or thread and dropped there changes nothing.)
fn unwind_caught(id: FiberId) {
    if let Some(core) = context::current() {
        core.unwind_caught(id);
    }
}

/// How a park in a fiber ended, when it did not unwind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Parked {
    /// Woken (possibly spuriously): re-check and park again if needed.
    Woken,
    /// The park's own deadline passed.
    TimedOut,
}

/// Unwinds the current fiber if it has been cancelled or its innermost
/// `fibra::timeout` has expired (unless it is unwinding already). Returns
/// the innermost timeout, which has not expired.
#[inline]
pub(crate) fn check_unwind(core: &Core) -> Option<TimeoutScope> {
    if !core.current_may_unwind() {
        return None; // the common case: nothing could unwind here
    }
    check_unwind_slow(core)
}

/// [`fibra::yield_now`](crate::yield_now) of the running context: a
/// cancellation point (as [`check_unwind`]), then the yield. A plain fiber
/// pays for both with the one test of [`Core::current_may_unwind`].
#[inline(always)]
pub(crate) fn yield_current(core: &Core) {
    if !core.current_may_unwind() {
        core.yield_plain(); // the common case: a plain fiber
        return;
    }
    yield_current_slow(core);
}

#[cold]
#[inline(never)]
fn yield_current_slow(core: &Core) {
    check_unwind_slow(core);
    core.yield_now();
}

/// What the running fiber owes, without unwinding it: the payload of its
/// cancellation or of its innermost `fibra::timeout` if that has expired,
/// or else that timeout, which has not. [`check_unwind`] unwinds with the
/// payload; a wait that must not unwind (a scope waiting for its fibers,
/// whose frames borrow from it) acts on it itself.
pub(crate) fn owed_unwind(
    core: &Core,
) -> Result<Option<TimeoutScope>, Box<dyn std::any::Any + Send>> {
    let (cancelled, scope) = {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { core.local() };
        let rec = l.running();
        (rec.flags.cancelled(), rec.timeout)
    };
    if cancelled {
        return Err(CancelUnwind::unwinding(core));
    }
    match scope {
        Some(t) if t.deadline <= clock::now_ns() => Err(Box::new(TimeoutUnwind {
            id: t.id,
            fiber: core.current_id(),
        })),
        scope => Ok(scope),
    }
}

#[cold]
fn check_unwind_slow(core: &Core) -> Option<TimeoutScope> {
    if core.current_is_unwinding() {
        return None;
    }
    match owed_unwind(core) {
        Ok(scope) => scope,
        Err(payload) => unwind(core, payload),
    }
}

/// Runs `f` on the running context with a deadline (ns): where `f` is
/// still blocked at `deadline`, its park unwinds it (its destructors run)
/// and this returns `None`. The scope of `fibra::timeout`. Scopes nest;
/// the earliest deadline wins; a panic of `f` passes through unchanged.
pub(crate) fn with_deadline<T>(core: &Core, deadline: u64, f: impl FnOnce() -> T) -> Option<T> {
    // The deadline is set on the running fiber and taken back below: this
    // frame must not be suspended by a generator in between.
    let _pin = StackPin::new();
    let id = next_scope_id();
    let previous = core.set_timeout(deadline, id);
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    core.restore_timeout(previous);
    if result.is_err() {
        core.mark_unwinding(false); // caught here
    }
    match result {
        Ok(value) => Some(value),
        Err(payload) => match payload.downcast_ref::<TimeoutUnwind>() {
            Some(t) if t.id == id => None,
            _ => panic::resume_unwind(payload),
        },
    }
}

/// A new id for a deadline scope, so that an unwind is caught by the scope
/// whose deadline started it and passes through the others.
fn next_scope_id() -> NonZeroU64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NonZeroU64::new(NEXT.fetch_add(1, Ordering::Relaxed)).expect("timeout ids exhausted")
}

/// Starts unwinding the current fiber with one of our payloads.
fn unwind(core: &Core, payload: Box<dyn std::any::Any + Send>) -> ! {
    core.mark_unwinding(true);
    std::panic::resume_unwind(payload)
}

/// Parks the current fiber until it is unparked or `deadline` (ns) passes,
/// unwinding if it is cancelled or its `fibra::timeout` expires.
///
/// A context that is unwinding parks plainly (a destructor that blocks does
/// block): unwinding it again from inside its own cleanup would abort.
///
/// Inlined: see `Core::switch_to` on frames above a switch.
#[inline(always)]
pub(crate) fn park(core: &Core, deadline: Option<u64>, on: WaitOn) -> Parked {
    if core.current_is_unwinding() {
        let wake = core.park_unwinding(deadline, on);
        return if wake == Wake::TimedOut {
            Parked::TimedOut
        } else {
            Parked::Woken
        };
    }
    let scope = check_unwind(core);
    let effective = match (deadline, scope) {
        (Some(d), Some(s)) => Some(d.min(s.deadline)),
        (d, s) => d.or(s.map(|s| s.deadline)),
    };
    match core.park_raw(effective, on) {
        Wake::Unparked => Parked::Woken,
        Wake::Cancelled => unwind(core, CancelUnwind::unwinding(core)),
        Wake::TimedOut => match scope {
            Some(scope) if deadline.is_none_or(|d| scope.deadline <= d) => unwind(
                core,
                Box::new(TimeoutUnwind {
                    id: scope.id,
                    fiber: core.current_id(),
                }),
            ),
            _ => Parked::TimedOut,
        },
    }
}

/// How a park that must not unwind ended (see [`park_without_unwind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Halted {
    /// Woken (possibly spuriously): re-check and park again if needed.
    Woken,
    /// The park's own deadline passed.
    TimedOut,
    /// The fiber is cancelled: it would unwind at a [`park`].
    Cancelled,
    /// The fiber's innermost `fibra::timeout` expired: it would unwind at
    /// a [`park`].
    Expired,
}

/// Parks the current fiber as [`park`] does, but reports cancellation and
/// an expired `fibra::timeout` instead of unwinding: for code that must
/// not unwind, such as an `extern "C"` hook called by code that declared it
/// cannot, or a channel wait that keeps what it was served before the cancel
/// (`channel::context::wait`). The fiber unwinds at its next [`park`].
pub(crate) fn park_without_unwind(core: &Core, deadline: Option<u64>, on: WaitOn) -> Halted {
    if core.current_is_unwinding() {
        // A destructor's call during an unwind: wait plainly, as `park` does.
        return match core.park_unwinding(deadline, on) {
            Wake::TimedOut => Halted::TimedOut,
            _ => Halted::Woken,
        };
    }
    let (cancelled, scope) = {
        // SAFETY: on the runtime's thread (`core` is the runtime entered
        // here); a short borrow, the only one live, running no user code.
        let l = unsafe { core.local() };
        let rec = l.running();
        (rec.flags.cancelled(), rec.timeout)
    };
    if cancelled {
        return Halted::Cancelled;
    }
    if scope.is_some_and(|s| s.deadline <= clock::now_ns()) {
        return Halted::Expired;
    }
    let effective = match (deadline, scope) {
        (Some(d), Some(s)) => Some(d.min(s.deadline)),
        (d, s) => d.or(s.map(|s| s.deadline)),
    };
    match core.park_raw(effective, on) {
        Wake::Unparked => Halted::Woken,
        Wake::Cancelled => Halted::Cancelled,
        Wake::TimedOut => match scope {
            Some(s) if deadline.is_none_or(|d| s.deadline <= d) => Halted::Expired,
            _ => Halted::TimedOut,
        },
    }
}

/// [`park_without_unwind`], in a call a signal handler ends: the runtime
/// wakes the context when a handler runs on its thread (see
/// `scheduler::interrupt`), and the caller compares the thread's count of
/// handlers with the one it took before.
#[cfg_attr(not(feature = "hook"), allow(dead_code))] // (only hooked calls park so)
pub(crate) fn park_interruptible(core: &Core, deadline: Option<u64>, on: WaitOn) -> Halted {
    core.set_interruptible(true);
    let halted = park_without_unwind(core, deadline, on);
    core.set_interruptible(false);
    halted
}

/// [`park_regardless`], in a call a signal handler ends (as
/// [`park_interruptible`]).
#[cfg_attr(not(feature = "hook"), allow(dead_code))] // (only hooked calls park so)
pub(crate) fn park_regardless_interruptible(core: &Core, deadline: Option<u64>, on: WaitOn) {
    core.set_interruptible(true);
    park_regardless(core, deadline, on);
    core.set_interruptible(false);
}

/// Called in a signal handler, after the program's own handler ran on this
/// thread: counts it (see `scheduler::interrupt`) and makes the runtime
/// entered on this thread, if any, look (its `epoll_wait` may have begun
/// just before the signal came, and would not return for it). Touches
/// only the thread-local count, the runtime's immutable part and its
/// eventfd: async-signal-safe.
#[cfg_attr(not(feature = "hook"), allow(dead_code))] // (only hooked calls park so)
pub(crate) fn signal_handled(restart: bool) {
    crate::scheduler::interrupt::record(restart);
    if let Some(core) = crate::scheduler::context::current() {
        core.shared.wake_fd();
    }
}

/// Parks the current fiber until it is woken or `deadline` passes, paying
/// no heed to its cancellation or `fibra::timeout` (it neither unwinds nor
/// returns early for them): a hooked `sleep`, which sleeps its time out.
///
/// Inlined: see `Core::switch_to` on frames above a switch.
#[inline(always)]
pub(crate) fn park_regardless(core: &Core, deadline: Option<u64>, on: WaitOn) {
    if core.current_is_unwinding() {
        core.park_unwinding(deadline, on);
    } else {
        core.park_raw(deadline, on);
    }
}

/// Parks the current context until it is woken or `deadline` passes, and
/// for nothing else: it neither unwinds nor returns early for cancellation
/// or a `fibra::timeout`, whether or not it is unwinding already. For a
/// wait whose frame others borrow from until it returns (a scope's, a
/// blocking job's), which must not unwind before they are done.
///
/// Inlined: see `Core::switch_to` on frames above a switch.
#[inline(always)]
pub(crate) fn park_uncancellable(core: &Core, deadline: Option<u64>, on: WaitOn) {
    core.park_raw(deadline, on);
}

/// Retires the calling fiber's current token (see `Core::retire_token`);
/// nothing on a plain thread, where a stray `unpark` only makes one later
/// `park` return early, which every thread-park loop tolerates.
pub(crate) fn retire_token() {
    if let Some(core) = context::current() {
        core.retire_token();
    }
}

/// Parks the calling context: the fiber (see [`park`]) or the thread.
/// `deadline` in ns of the monotonic clock.
///
/// Inlined: see `Core::switch_to` on frames above a switch.
#[inline(always)]
pub(crate) fn park_current(deadline: Option<u64>, on: WaitOn) -> Parked {
    match context::current() {
        Some(core) => park(core, deadline, on),
        None => park_thread(deadline, on),
    }
}

/// [`park_current`] on a plain thread: `std::thread::park`, told after the
/// owning runtime's `stall_warning` if the thread owns a runtime whose
/// fibers cannot run meanwhile (see `scheduler::owner`).
#[cold]
fn park_thread(deadline: Option<u64>, on: WaitOn) -> Parked {
    let now = clock::now_ns();
    if deadline.is_some_and(|d| now >= d) {
        return Parked::TimedOut;
    }
    let left = deadline.map(|d| d - now);
    match owner::blocked_runtime() {
        Some((after, fibers)) if left.is_none_or(|l| l > after.as_nanos() as u64) => {
            os_thread::park_timeout(after);
            let waited = clock::now_ns() - now;
            if waited >= after.as_nanos() as u64 {
                owner::warn_blocked(on, fibers, std::time::Duration::from_nanos(waited));
            }
            // Woken, or told: the caller looks again, and parks again.
            return Parked::Woken;
        }
        _ => {}
    }
    match left {
        None => os_thread::park(),
        Some(left) => os_thread::park_timeout(std::time::Duration::from_nanos(left)),
    }
    if deadline.is_some_and(|d| clock::now_ns() >= d) {
        Parked::TimedOut
    } else {
        Parked::Woken
    }
}

/// Whether the calling context — a fiber, `block_on`'s closure or a plain
/// thread — is unwinding. Inside a runtime `std::thread::panicking` cannot
/// tell, the panic count being per thread (see
/// `Core::current_is_unwinding`). For lock poisoning.
#[inline]
pub(crate) fn unwinding() -> bool {
    if !std::thread::panicking() {
        return false; // one relaxed load of a global: the common case
    }
    match context::current() {
        Some(core) => core.current_is_unwinding(),
        None => std::thread::panicking(),
    }
}
