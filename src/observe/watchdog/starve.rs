//! A starved runtime: fibers that take turns, none of them long enough for
//! a stall warning, while the root does not poll for I/O and timers.
//!
//! Fibers switch to each other directly and the root polls every
//! `BUDGET` switches (or when nothing is ready, see `core.rs`): 200 fibers
//! that each compute 50 ms between parks hold every timer and socket of
//! their thread for seconds, yet none of them runs 100 ms without a switch.
//! The runtime counts its polls in [`Watch::polls`] (a plain store per
//! poll, that is once per `BUDGET` switches at most: nothing on the switch
//! path); the watchdog, which samples every runtime anyway, sees the count
//! stand still while contexts run, and then samples that runtime more
//! often ([`SAMPLES`] a threshold) to learn which fibers take the time: at
//! each look it reads which context runs (`Watch::read`, when the word
//! names another context than at the last look) and credits it with the
//! time since the last look, as a sampling profiler does. When the count
//! has stood still for `stall_warning` it warns (target `fibra::stall`)
//! with the fibers that took most of that time, and warns again, with the
//! totals, when the runtime polls again; a dump the runtime answers late
//! reads the same record ([`Watch::starved_now`]), which the runtime's
//! `Watch` keeps (`watch/starve_record.rs`).
//!
//! Not told as starvation: a window in which one context ran all along
//! (the stall warning tells that one), and a runtime whose word is 0 (it
//! waits for events, or nobody drives it).

use std::sync::atomic::Ordering;

use crate::report::{self, Level};
use crate::scheduler::watch::starve_record::{Starved, Who};
use crate::scheduler::watch::{SEEN, Watch};

/// Looks a runtime gets per `stall_warning` while it does not poll.
pub(crate) const SAMPLES: u64 = 20;

/// What one look at a runtime found.
pub(crate) enum Found {
    /// It polled (or waits, or is not driven) since the last look.
    Fed,
    /// It has not polled since the last look: look again soon.
    Starving,
}

/// One look at `watch`'s poll count (the watchdog's, after its stall
/// check; `stall_pending`: a stall warning is out for this runtime).
/// Warns, outside the lock, when a window reaches `threshold` ns and when
/// a warned one ends.
pub(crate) fn look(
    watch: &Watch,
    thread: &str,
    threshold: u64,
    now: u64,
    stall_pending: bool,
) -> Found {
    let polls = watch.polls.load(Ordering::Relaxed);
    let marked = watch.word.load(Ordering::Acquire);
    let word = marked & !SEEN;
    let mut s = watch.lock_starve();
    if polls != s.polls || word == 0 || s.since == 0 {
        let ended = s.warned.then(|| s.report(now));
        s.reset(polls, now);
        if word == 0 {
            s.since = 0; // no window while it waits
        }
        drop(s);
        if let Some(ended) = ended {
            warn_fed(thread, &ended);
        }
        return Found::Fed;
    }
    s.stalled |= stall_pending;
    // Who runs now: the same as at the last look if the word is, else read
    // (under the hazard: it may have ended meanwhile, then it is skipped).
    let who = if word == s.last_word {
        s.last.clone()
    } else {
        watch.read(word).map(|r| Who {
            id: r.id,
            name: r.name,
            root: r.root,
        })
    };
    let credit = now.saturating_sub(s.last_at);
    s.last_at = now;
    s.last_word = word;
    if let Some(who) = &who {
        match s.shares.iter_mut().find(|(w, _)| w == who) {
            Some((_, ns)) => *ns += credit,
            None => s.shares.push((who.clone(), credit)),
        }
    }
    s.last = who;
    // One context all along is a stall, which its own warning tells: not
    // while the one running now has run half the threshold without a
    // switch (it may be one; the stall check decides), nor with one
    // context seen.
    let running_for = if marked & SEEN != 0 {
        now.saturating_sub(watch.seen_since.load(Ordering::Relaxed))
    } else {
        0
    };
    let due = !s.warned
        && !s.stalled
        && now.saturating_sub(s.since) >= threshold
        && running_for < threshold / 2
        && s.shares.len() >= 2;
    if due {
        s.warned = true;
        let report = s.report(now);
        drop(s);
        warn_starved(thread, &report);
    }
    Found::Starving
}

impl Watch {
    /// The runtime's time without a poll so far, as the watchdog sampled
    /// it, if it is in one (for a dump it answers late).
    pub(crate) fn starved_now(&self, now: u64) -> Option<Starved> {
        let s = self.lock_starve();
        (s.since != 0 && !s.shares.is_empty()).then(|| s.report(now))
    }
}

fn warn_starved(thread: &str, s: &Starved) {
    let fibers = s.list();
    tell(
        thread,
        s,
        &fibers,
        format!(
            "thread {thread:?} has not polled for I/O and timers for {:.0?}: its fibers take \
             turns without any of them waiting, and its timers and sockets wait meanwhile; most \
             of that time (sampled): {fibers}. Move long computations to spawn_blocking, or \
             spread the fibers over workers",
            s.for_,
        ),
    );
}

fn warn_fed(thread: &str, s: &Starved) {
    let fibers = s.list();
    tell(
        thread,
        s,
        &fibers,
        format!(
            "thread {thread:?} polled for I/O and timers again after {:.0?} in all; most of that \
             time (sampled): {fibers}",
            s.for_,
        ),
    );
}

/// Tells a starvation's start or end (`message`), with its fields.
fn tell(thread: &str, s: &Starved, fibers: &str, message: String) {
    report::tell(Level::Warn, "fibra::stall", &message, None, || {
        tracing::warn!(
            target: "fibra::stall",
            thread,
            not_polled_for = ?s.for_,
            fibers,
            "{message}"
        );
    });
}
