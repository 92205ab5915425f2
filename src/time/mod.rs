//! Time: sleeping and deadlines for fibers.
//!
//! Timers live in a hierarchical wheel per runtime (`timer/wheel.rs`, below
//! the scheduler): arming and cancelling cost O(1), a timer never fires
//! before its deadline, and timers due together fire in deadline order.
//! When nothing is ready the runtime sleeps in `epoll_wait` until the next
//! deadline (a timerfd), so idle runtimes cost nothing.

#[cfg(feature = "futures-io")]
mod sleep;

#[cfg(feature = "futures-io")]
pub use sleep::Sleep;

use std::fmt;
use std::time::{Duration, Instant};

use crate::scheduler::context;
use crate::scheduler::core::Core;
use crate::scheduler::park::{self, Parked, check_unwind, park};
use crate::scheduler::wait_on::WaitOn;
use crate::timer::clock;

/// Blocks the current fiber for at least `d` while other fibers run. Outside
/// a runtime, sleeps the thread.
///
/// A sleep is a cancellation point: a cancelled fiber (or one whose
/// [`timeout`] expired) unwinds from it, even when it need not wait. A sleep
/// that is already due — `sleep(Duration::ZERO)`, or [`sleep_until`] a
/// past instant — still yields, as [`yield_now`](crate::yield_now) does, so
/// a loop of them lets the other fibers run and the runtime hear from other
/// threads (a `cancel` from one, say), as `std::thread::sleep(ZERO)` lets
/// the OS reschedule.
///
/// ```
/// use std::time::{Duration, Instant};
///
/// fibra::run(|| {
///     let start = Instant::now();
///     fibra::sleep(Duration::from_millis(10));
///     assert!(start.elapsed() >= Duration::from_millis(10));
/// });
/// ```
pub fn sleep(d: Duration) {
    match context::current() {
        Some(core) => {
            // One clock read: a sleep of a million fibers spent a seventh of
            // its own time reading the clock, twice per sleep.
            let now = clock::now_ns();
            sleep_ns(core, now, now.saturating_add(clock::duration_ns(d)))
        }
        None => std::thread::sleep(d),
    }
}

/// Blocks the current fiber until `deadline` while other fibers run. Outside
/// a runtime, sleeps the thread.
///
/// A cancellation point, as [`sleep`] is; a deadline already past yields.
///
/// ```
/// use std::time::{Duration, Instant};
///
/// fibra::run(|| {
///     let deadline = Instant::now() + Duration::from_millis(5);
///     fibra::sleep_until(deadline);
///     assert!(Instant::now() >= deadline);
/// });
/// ```
pub fn sleep_until(deadline: Instant) {
    match context::current() {
        Some(core) => sleep_ns(core, clock::now_ns(), clock::instant_ns(deadline)),
        None => {
            let now = Instant::now();
            if deadline > now {
                std::thread::sleep(deadline - now);
            }
        }
    }
}

/// Sleeps until `deadline`, the clock having read `now` just before.
fn sleep_ns(core: &Core, now: u64, deadline: u64) {
    if deadline <= now {
        // Already due: no timer, but a yield, so that a loop of due sleeps
        // neither starves the other fibers nor keeps its runtime from
        // reading messages from other threads (a yield counts against the
        // budget after which the runtime polls), a cancel among them. And,
        // on both sides of the switch, a point where cancellation and
        // timeouts take effect.
        park::yield_current(core);
        check_unwind(core);
        return;
    }
    loop {
        if park(core, Some(deadline), WaitOn::Sleep) == Parked::TimedOut
            || clock::now_ns() >= deadline
        {
            return;
        }
    }
}

/// The error of [`timeout`]: the deadline passed first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(_: Elapsed) -> std::io::Error {
        std::io::ErrorKind::TimedOut.into()
    }
}

/// Runs `f` on the current fiber, but gives up at the deadline `d` from now:
/// if `f` is still blocked then (sleeping, joining, waiting on I/O, ...),
/// it is unwound from that park point, its destructors run, and `timeout`
/// returns `Err(Elapsed)`.
///
/// The deadline takes effect only where `f` blocks or yields: a computation
/// that never parks runs to its end. Timeouts nest; the earliest deadline
/// wins. A panic in `f` passes through unchanged.
///
/// # With the `hook` feature
///
/// A call into C that waits (std's socket calls, a C client library's, a
/// `select` or `epoll_wait`, all parked by the hooks) cannot be unwound:
/// its frames are C's. When the deadline passes while one waits, it fails
/// with `ETIMEDOUT` (std reports `io::ErrorKind::TimedOut`; a `connect` is
/// aborted, leaving its socket unconnected) and `f` goes on; it is unwound
/// at its next fibra park. If `f` returns first — having passed that error
/// up — `timeout` returns `Ok` of what it returned, not `Err(Elapsed)`. A
/// hooked `std::thread::sleep` and a name lookup are never cut short.
///
/// # Panics
///
/// Outside a fibra runtime.
///
/// ```
/// use std::time::Duration;
///
/// fibra::run(|| {
///     let slow = fibra::timeout(Duration::from_millis(10), || {
///         fibra::sleep(Duration::from_secs(60));
///     });
///     assert!(slow.is_err());
///     let fast = fibra::timeout(Duration::from_secs(60), || 7);
///     assert_eq!(fast, Ok(7));
/// });
/// ```
#[track_caller]
pub fn timeout<T>(d: Duration, f: impl FnOnce() -> T) -> Result<T, Elapsed> {
    let core = context::expect("fibra::timeout");
    park::with_deadline(core, clock::after_ns(d), f).ok_or(Elapsed(()))
}
