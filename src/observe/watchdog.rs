//! The stall watchdog: one thread per process, shared by every runtime,
//! that samples each runtime's [`Watch`] word every half of the shortest
//! `stall_warning` and warns (`tracing` WARN, target `fibra::stall`) about
//! a context that has run that long without a switch, while it still runs.
//! It warns again, with the total, when that context stops: the runtime
//! does when its root waits or leaves, the watchdog when it sees the word
//! change (it samples every millisecond while a stall goes on, so the
//! total is right to about that). Nothing of this is on the switch path,
//! which only stores the word (see `scheduler::watch`).
//!
//! It starts when the first runtime with a warning has been built (a
//! process that only makes unwatched runtimes, or fails to make one, gets
//! no extra thread). With no watched
//! runtime it waits on a condvar until one is made; when every watched
//! runtime is idle (its word is 0: waiting in `epoll_wait`, or not driven)
//! it sleeps on the same condvar, and a runtime that starts running again
//! wakes it (see `watchdog_sleep`: a relaxed load on that path). It holds
//! no lock while it emits an event (a subscriber may make a runtime, which
//! registers here).
//!
//! Its first warning carries the stalled context's stack as it is then,
//! sampled by stopping the runtime's thread (`observe::sample`), then
//! named (on a thread of its own, waited for a bounded time:
//! `stack_trace::naming`) before the warning goes out. Names that take
//! longer (the first lookup of a large debug build loads its debug info)
//! follow in a warning of their own, target `fibra::stall::names`.
//!
//! It also tells a runtime starved by fibers that take turns without any
//! of them stalling: see [`starve`].

pub(crate) mod starve;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::observe::naming;
use crate::report::{self, Level};
use crate::scheduler::fiber_id::describe;
use crate::scheduler::registry;
use crate::scheduler::stack_trace::Sampled;
use crate::scheduler::watch::{self, Report, Running, SEEN, Watch};
use crate::scheduler::watchdog_sleep::{ASLEEP, WAKE, lock};
use crate::timer::clock;

/// The default of `runtime::Builder::stall_warning`.
pub(crate) const DEFAULT_STALL: Duration = Duration::from_millis(100);

/// How often the watchdog samples while a stall it warned about goes on:
/// the precision of the total it reports when it sees the stall end.
const WHILE_STALLED: Duration = Duration::from_millis(1);

/// Whether the watchdog thread runs (or could not be started): the fork
/// generation of the process that started it, plus one (0: not started).
/// A forked child has no watchdog thread of its parent's (see
/// `scheduler::fork`).
static STARTED: AtomicU32 = AtomicU32::new(0);

fn this_process() -> u32 {
    crate::scheduler::fork::generation().wrapping_add(1)
}

/// A runtime was built with the warning after `stall` (`Duration::MAX`:
/// none): starts the watchdog if it has not started, a relaxed load when
/// it has. Once a build has succeeded, not while it runs: a build that
/// fails part-way (workers that started, then a worker that could not)
/// leaves no thread behind.
pub(crate) fn runtime_built(stall: Duration) {
    if stall != Duration::MAX && STARTED.load(Ordering::Relaxed) != this_process() {
        start();
    }
}

/// A failure to start the thread is not fatal: the runtime works,
/// unwatched (and says so, once).
#[cold]
#[inline(never)]
fn start() {
    let mut state = lock();
    let process = this_process();
    STARTED.store(process, Ordering::Relaxed);
    if state.started != process {
        let spawned = crate::scheduler::helper::spawn_quiet(|| {
            std::thread::Builder::new()
                .name("fibra-watchdog".into())
                .spawn(watch_loop)
        });
        match spawned {
            Ok(_) => state.started = process,
            Err(e) => {
                drop(state);
                let message = format!("cannot start the fibra stall watchdog: {e}");
                report::tell(Level::Warn, "fibra::stall", &message, None, || {
                    tracing::warn!(target: "fibra::stall", error = %e, "cannot start the fibra stall watchdog");
                });
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
        let mut shortest = u64::MAX;
        // The shortest threshold of a runtime that has not polled since
        // the last look (see `starve`).
        let mut starving = u64::MAX;
        let (mut busy, mut stalled) = (false, false);
        for (thread, shared) in &runtimes {
            let watch = &shared.watch;
            let threshold = watch.threshold_ns.load(Ordering::Relaxed);
            if threshold == u64::MAX {
                continue;
            }
            shortest = shortest.min(threshold);
            // Read for each runtime, not once a round: a round may take
            // long (a stalled stack sampled; its names were looked up here
            // too, until the teller thread took that over), and a mark
            // dated before that time counted it as the marked context's
            // (a starver that yields every 50 ms was told as a stall of
            // 200 to 260 ms while the watchdog named another runtime's
            // stalled stack: tests/starved.rs).
            let now = clock::now_ns();
            busy |= sample(watch, thread, threshold, now);
            let now = clock::now_ns();
            let pending = watch.pending.load(Ordering::Relaxed);
            stalled |= pending;
            if let starve::Found::Starving = starve::look(watch, thread, threshold, now, pending) {
                starving = starving.min(threshold);
            }
        }
        let state = lock();
        let generation = state.generation;
        if shortest == u64::MAX {
            drop(runtimes);
            let _state = WAKE
                .wait_while(state, |s| s.generation == generation)
                .unwrap_or_else(|e| e.into_inner());
            continue;
        }
        if !busy && !stalled && watch::asymmetric() {
            drop(state);
            try_sleep(runtimes, generation);
            continue;
        }
        drop(runtimes);
        let period = if stalled {
            WHILE_STALLED
        } else if starving != u64::MAX {
            Duration::from_nanos((starving / starve::SAMPLES).max(1_000_000))
        } else {
            Duration::from_nanos((shortest / 2).max(1_000_000))
        };
        let _state = WAKE
            .wait_timeout_while(state, period, |s| s.generation == generation)
            .unwrap_or_else(|e| e.into_inner());
    }
}

/// Sleeps until a watched runtime runs or a runtime is made, unless one
/// of `runtimes` runs already. The Dekker pair with
/// [`Watch::publish_busy`]: we store `ASLEEP`, then (`membarrier`) load
/// every word; a runtime stores its word, then loads `ASLEEP`. One of us
/// sees the other's store.
fn try_sleep(
    runtimes: Vec<(String, std::sync::Arc<crate::scheduler::shared::Shared>)>,
    generation: u64,
) {
    {
        let _state = lock();
        ASLEEP.store(true, Ordering::SeqCst);
    }
    watch::heavy_fence();
    let busy = runtimes.iter().any(|(_, shared)| {
        let watch = &shared.watch;
        watch.threshold_ns.load(Ordering::Relaxed) != u64::MAX
            && watch.word.load(Ordering::SeqCst) != 0
    });
    drop(runtimes); // not held while asleep: they may be dropped meanwhile
    let state = lock();
    let _state = if busy {
        state
    } else {
        WAKE.wait_while(state, |s| {
            ASLEEP.load(Ordering::Relaxed) && s.generation == generation
        })
        .unwrap_or_else(|e| e.into_inner())
    };
    ASLEEP.store(false, Ordering::Relaxed);
}

/// One look at a runtime: marks the word, tells the end of a stall it
/// warned about that has ended, and warns about a context that has run
/// `threshold` ns without a switch. Returns whether a context runs.
///
/// `now` is read before the word: a mark still in the word then means
/// that its context has run without a switch from the mark to `now` at
/// least. The mark's time is read after the mark is set, so that neither
/// a delay of the watchdog between its clock read and the mark nor a
/// context switched out and in again meanwhile (the same word) counts as
/// time the context ran: `running_for` is a lower bound.
fn sample(watch: &Watch, thread: &str, threshold: u64, now: u64) -> bool {
    let word = watch.word.load(Ordering::Acquire);
    if watch.pending.load(Ordering::Relaxed) {
        let reported = watch.lock_report().as_ref().map(|r| r.word);
        if reported != Some(word) {
            if let Some((running, total)) = watch.take_ended(now) {
                warn_ended(thread, &running, total);
            }
        } else {
            return true; // still stalled, warned already
        }
    }
    if word == 0 {
        return false;
    }
    if word & SEEN == 0 {
        // A switch since the last look (or the first look): mark it. A
        // failed mark is a switch meanwhile: the next look marks that.
        watch.seen_since.store(now, Ordering::Relaxed);
        watch
            .seen_delay
            .store(watch.run_delay().unwrap_or(0), Ordering::Relaxed);
        let marked =
            watch
                .word
                .compare_exchange(word, word | SEEN, Ordering::Release, Ordering::Relaxed);
        if marked.is_ok() {
            // (A dump that reads it in between sees `now`, as before.)
            watch.seen_since.store(clock::now_ns(), Ordering::Relaxed);
        }
        return true;
    }
    let since = watch.seen_since.load(Ordering::Relaxed);
    if now.saturating_sub(since) < threshold {
        return true;
    }
    // Past the threshold on the wall clock; but the time the thread stood
    // preempted since the mark is not the context's (see `Watch::run_delay`).
    let preempted = watch.run_delay().map_or(0, |d| {
        d.saturating_sub(watch.seen_delay.load(Ordering::Relaxed))
    });
    if now.saturating_sub(since).saturating_sub(preempted) < threshold {
        return true;
    }
    let Some(mut running) = watch.read(word) else {
        return true; // it switched out meanwhile
    };
    running.running_for = Some(Duration::from_nanos(
        (now - since).saturating_sub(preempted),
    ));
    *watch.lock_report() = Some(Report {
        word,
        running: running.clone(),
        since,
        emitting: true,
        ended_at: None,
    });
    watch.pending.store(true, Ordering::Relaxed);
    // Where it is now (after the report is in: an end meanwhile is kept
    // for after the warning), named and told on the teller thread.
    let sampled = crate::observe::sample::of(watch, word);
    let teller_thread = thread.to_owned();
    // The bound on the names runs from now: a warning queued behind other
    // runtimes' waits no longer than one handed over alone.
    let named_by = std::time::Instant::now() + naming::NAMING;
    naming::tell_in_order(move || {
        let stack = stack_text(sampled, named_by, &teller_thread, &running);
        warn_running(&teller_thread, &running, &stack);
    });
    // Told after the warning, if the end came while it was handed over.
    let ended_at = {
        let mut report = watch.lock_report();
        let ended_at = report.as_ref().and_then(|r| r.ended_at);
        if let Some(r) = report.as_mut() {
            r.emitting = false;
        }
        ended_at
    };
    if let Some(at) = ended_at
        && let Some((running, total)) = watch.take_ended(at)
    {
        warn_ended(thread, &running, total);
    }
    true
}

/// A sampled stack as the warning's `stack` field prints it: named (on
/// the teller thread, if the names come by `named_by`; later, in a warning
/// of its own, if not), or why it is left out.
fn stack_text(sampled: Sampled, named_by: std::time::Instant, thread: &str, r: &Running) -> String {
    match sampled {
        Sampled::Stack(raw) => {
            let (thread, who) = (thread.to_owned(), describe(r.id, r.name.as_deref(), r.root));
            let (id, name) = (r.id.as_u64(), r.name.clone());
            naming::name_within(
                raw,
                named_by.saturating_duration_since(std::time::Instant::now()),
                move |stack| warn_named_late(&thread, &who, id, name.as_deref(), &stack),
            )
        }
        Sampled::Missing(why) => format!("(not sampled: {why})"),
    }
}

/// The names of the stack in the stall warning about `who`, which went
/// with addresses only: the debug info had not loaded in time. A target
/// of its own (`fibra::stall::names`, which a filter on `fibra::stall`
/// takes too): a reader that pairs each stall's warning with its end sees
/// the same two events as before.
fn warn_named_late(thread: &str, who: &str, id: u64, name: Option<&str>, stack: &str) {
    let message =
        format!("the stack of {who} in the stall warning above (thread {thread:?}), now named");
    report::tell(
        Level::Warn,
        "fibra::stall::names",
        &message,
        Some(&stack),
        || {
            tracing::warn!(
                target: "fibra::stall::names",
                fiber = id,
                name,
                thread,
                stack = %stack,
                "{message}"
            );
        },
    );
}

fn warn_running(thread: &str, r: &Running, stack: &str) {
    let location = r.location.map(ToString::to_string);
    let running_for = r.running_for.unwrap_or_default();
    let message = format!(
        "{} has run for {running_for:.0?} without blocking in fibra: every other fiber of \
         thread {thread:?} waits ({})",
        describe(r.id, r.name.as_deref(), r.root),
        STALL_CAUSES,
    );
    let below = match &location {
        Some(at) => format!("spawned at {at}\n{stack}"),
        None => stack.to_owned(),
    };
    report::tell(Level::Warn, "fibra::stall", &message, Some(&below), || {
        tracing::warn!(
            target: "fibra::stall",
            fiber = r.id.as_u64(),
            name = r.name.as_deref(),
            spawned_at = location.as_deref(),
            running_for = ?running_for,
            thread,
            stack = %stack,
            "{message}"
        );
    });
}

/// What usually holds a thread, as the stall warning names it. With the
/// `hook` feature std's sleep, sockets and name lookups park the fiber, so
/// what is left is named instead.
#[cfg(not(feature = "hook"))]
const STALL_CAUSES: &str = "a CPU loop without yield_now, std::thread::sleep, std::fs, a std \
     lock or channel, a blocking client library: use fibra's, or spawn_blocking";
#[cfg(feature = "hook")]
const STALL_CAUSES: &str = "a CPU loop without yield_now, std::fs or another file read, a std \
     lock or channel, a C library that calls the kernel or resolves names by itself, an \
     embedded event loop waiting with a signal mask: use fibra's, or spawn_blocking";

/// Installs, once, a panic hook that says which fiber panicked before the
/// previous hook (std's report, usually) runs: std's report names only the
/// thread. Called by [`observe::install`](crate::observe::install).
pub(crate) fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    if std::thread::panicking() {
        return; // `set_hook` may not be called now; the next runtime will
    }
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(core) = crate::scheduler::context::current()
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

/// Warns (target `fibra::stall`) that `r`, which the watchdog warned about,
/// has stopped after blocking `thread` for `total` in all.
pub(crate) fn warn_ended(thread: &str, r: &Running, total: Duration) {
    let message = format!(
        "{} blocked thread {thread:?} for {total:.0?} in all before it parked",
        describe(r.id, r.name.as_deref(), r.root),
    );
    let (thread, id, name) = (thread.to_owned(), r.id, r.name.clone());
    // After the warning it ends, which the teller may still be naming.
    naming::tell_in_order(move || {
        report::tell(Level::Warn, "fibra::stall", &message, None, || {
            tracing::warn!(
                target: "fibra::stall",
                fiber = id.as_u64(),
                name = name.as_deref(),
                running_for = ?total,
                thread,
                "{message}"
            );
        });
    });
}
