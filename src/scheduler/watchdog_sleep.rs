//! Where the stall watchdog sleeps, and what wakes it: its lock, its
//! condvar and the [`ASLEEP`] flag. Runtimes ring it from below the
//! watchdog: one made with a threshold [`register`]s, and one that runs
//! again while the watchdog sleeps [`wake`]s it (from
//! `Watch::publish_busy`, a relaxed load on that path). The watchdog's
//! thread, which waits here, is `watchdog.rs`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

pub(crate) struct State {
    /// The fork generation, plus one, of the process whose thread runs
    /// (see `observe::watchdog::STARTED`); 0: none.
    pub(crate) started: u32,
    /// Bumped by every registration, so a waiting watchdog re-reads the
    /// thresholds.
    pub(crate) generation: u64,
}

static STATE: Mutex<State> = Mutex::new(State {
    started: 0,
    generation: 0,
});
pub(crate) static WAKE: Condvar = Condvar::new();

/// The watchdog sleeps because every watched runtime was idle; a runtime
/// that runs again clears it (under `STATE`'s lock) and wakes it.
pub(crate) static ASLEEP: AtomicBool = AtomicBool::new(false);

pub(crate) fn lock() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Tells the watchdog that a runtime with a threshold was made.
pub(crate) fn register() {
    let mut state = lock();
    state.generation += 1;
    ASLEEP.store(false, Ordering::Relaxed);
    drop(state);
    WAKE.notify_all();
}

/// Whether the watchdog sleeps until a runtime runs: see
/// [`Watch::publish_busy`](crate::scheduler::watch::Watch::publish_busy).
#[inline(always)]
pub(crate) fn asleep() -> bool {
    ASLEEP.load(Ordering::Relaxed)
}

/// Wakes the sleeping watchdog: the runtime whose `Watch` threshold is
/// `threshold_ns` runs again.
#[cold]
#[inline(never)]
pub(crate) fn wake(threshold_ns: &AtomicU64) {
    if threshold_ns.load(Ordering::Relaxed) == u64::MAX {
        return; // not watched: the watchdog need not look
    }
    let state = lock();
    ASLEEP.store(false, Ordering::Relaxed);
    drop(state);
    WAKE.notify_all();
}
