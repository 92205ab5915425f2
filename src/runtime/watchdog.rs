//! The stall watchdog: one thread per process, shared by every runtime,
//! that samples each runtime's [`Watch`] word every half of the shortest
//! `stall_warning` and warns (`tracing` WARN, target `fibra::stall`) about
//! a context that has run that long without a switch, while it still runs.
//! The runtime warns again, with the total, when that context switches out
//! ([`Core::stall_ended`]).
//!
//! It starts with the first fiber spawned in the process (a process that
//! only makes runtimes, or fails to, gets no extra thread) and sleeps on a
//! condvar: with no watched runtime it waits until one is made. It holds
//! no lock while it emits an event (a subscriber may make a runtime, which
//! registers here).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::runtime::core::{Core, Key};
use crate::runtime::registry;
use crate::runtime::watch::{Running, Watch};
use crate::time::clock;

/// The default of `runtime::Builder::stall_warning`.
pub(crate) const DEFAULT_STALL: Duration = Duration::from_millis(100);

struct State {
    started: bool,
    /// Bumped by every registration, so a sleeping watchdog re-reads the
    /// thresholds.
    generation: u64,
}

static STATE: Mutex<State> = Mutex::new(State {
    started: false,
    generation: 0,
});
static WAKE: Condvar = Condvar::new();

fn lock() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the watchdog thread runs (or could not be started).
static STARTED: AtomicBool = AtomicBool::new(false);

/// Tells the watchdog that a runtime with a threshold was made.
pub(crate) fn register() {
    let mut state = lock();
    state.generation += 1;
    drop(state);
    WAKE.notify_all();
}

/// Starts the watchdog if it has not started: called at every spawn, a
/// relaxed load when it has.
#[inline]
pub(crate) fn ensure_started() {
    if !STARTED.load(Ordering::Relaxed) {
        start();
    }
}

/// A failure to start the thread is not fatal: the runtime works,
/// unwatched (and says so, once).
#[cold]
#[inline(never)]
fn start() {
    let mut state = lock();
    state.generation += 1;
    STARTED.store(true, Ordering::Relaxed);
    if !state.started {
        let spawned = std::thread::Builder::new()
            .name("fibra-watchdog".into())
            .spawn(watch_loop);
        match spawned {
            Ok(_) => state.started = true,
            Err(e) => {
                drop(state);
                tracing::warn!(target: "fibra::stall", error = %e, "cannot start the fibra stall watchdog");
                return;
            }
        }
    }
    drop(state);
    WAKE.notify_all();
}

fn watch_loop() {
    loop {
        let runtimes = registry::all();
        let now = clock::now_ns();
        let mut shortest = u64::MAX;
        for (thread, shared) in &runtimes {
            let watch = &shared.watch;
            let threshold = watch.threshold_ns.load(Ordering::Relaxed);
            if threshold == u64::MAX {
                continue;
            }
            shortest = shortest.min(threshold);
            if let Some(running) = sample(watch, threshold, now) {
                warn_running(thread, &running);
            }
        }
        drop(runtimes);
        let state = lock();
        let generation = state.generation;
        let _state = if shortest == u64::MAX {
            WAKE.wait_while(state, |s| s.generation == generation)
                .unwrap_or_else(|e| e.into_inner())
        } else {
            let period = Duration::from_nanos((shortest / 2).max(1_000_000));
            WAKE.wait_timeout_while(state, period, |s| s.generation == generation)
                .unwrap_or_else(|e| e.into_inner())
                .0
        };
    }
}

/// One look at a runtime: returns the context to warn about, if one has
/// run `threshold` ns without a switch and was not warned about yet.
fn sample(watch: &Watch, threshold: u64, now: u64) -> Option<Running> {
    let word = watch.word.load(Ordering::Acquire);
    if word != watch.seen_word.load(Ordering::Relaxed) {
        watch.seen_since.store(now, Ordering::Relaxed);
        watch.seen_word.store(word, Ordering::Release);
        return None;
    }
    let since = watch.seen_since.load(Ordering::Relaxed);
    if word == 0 || now.saturating_sub(since) < threshold {
        return None;
    }
    if watch.reported.load(Ordering::Relaxed) == word {
        return None; // warned already
    }
    let mut running = watch.read(word)?;
    running.running_for = Some(Duration::from_nanos(now - since));
    watch.reported.store(word, Ordering::Relaxed);
    Some(running)
}

fn warn_running(thread: &str, r: &Running) {
    let location = r.location.map(ToString::to_string);
    let running_for = r.running_for.unwrap_or_default();
    tracing::warn!(
        target: "fibra::stall",
        fiber = r.id.as_u64(),
        name = r.name.as_deref(),
        spawned_at = location.as_deref(),
        running_for = ?running_for,
        thread,
        "{} has run for {running_for:.0?} without blocking in fibra: every other fiber of \
         thread {thread:?} waits (a CPU loop without yield_now, std::thread::sleep, std::fs, \
         a std lock or channel: use fibra's, or spawn_blocking)",
        describe(r.id, r.name.as_deref(), r.root),
    );
}

/// `fiber 'name' (#id)`, `fiber #id`, or the root's description.
pub(crate) fn describe(id: crate::FiberId, name: Option<&str>, root: bool) -> String {
    match (root, name) {
        (true, _) => format!("the block_on closure (fiber #{id})"),
        (false, Some(name)) => format!("fiber '{name}' (#{id})"),
        (false, None) => format!("fiber #{id}"),
    }
}

impl Core {
    /// The context `key`, warned about by the watchdog, switches out (or
    /// the root goes to wait): warn again with the total. Call with no
    /// borrow of the runtime's state live (a subscriber's code runs).
    #[cold]
    #[inline(never)]
    pub(crate) fn stall_ended(&self, key: Key) {
        let watch = &self.shared.watch;
        let word = watch.word.load(Ordering::Relaxed);
        let reported = watch.reported.swap(0, Ordering::Relaxed);
        if reported != word || word == 0 {
            return; // stale: the report raced with a switch
        }
        let since = watch.seen_since.load(Ordering::Relaxed);
        let total = Duration::from_nanos(clock::now_ns().saturating_sub(since));
        let (id, name) = {
            // SAFETY: on the runtime's thread; short borrow, ended before
            // the event.
            let l = unsafe { self.local() };
            let Some(rec) = l.fibers.get(key) else { return };
            (rec.id, rec.name.clone())
        };
        let thread = &self.shared.thread_name;
        self.callback("event", || {
            tracing::warn!(
                target: "fibra::stall",
                fiber = id.as_u64(),
                name = name.as_deref(),
                running_for = ?total,
                thread = thread.as_str(),
                "{} blocked thread {thread:?} for {total:.0?} in all before it parked",
                describe(id, name.as_deref(), key == crate::runtime::core::ROOT),
            );
        });
    }
}

/// Installs, once, a panic hook that says which fiber panicked before the
/// previous hook (std's report, usually) runs: std's report names only the
/// thread.
pub(crate) fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    if std::thread::panicking() {
        return; // `set_hook` may not be called now; the next runtime will
    }
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(core) = crate::runtime::context::current()
                && let Some(r) = core.shared.watch.running_here()
            {
                let fiber = describe(r.id, r.name.as_deref(), false);
                match r.location {
                    Some(at) => eprintln!("fibra: {fiber}, spawned at {at}, panicked:"),
                    None => eprintln!("fibra: {fiber} panicked:"),
                }
            }
            previous(info);
        }));
    });
}
