//! The watchdog's record of a runtime's time without a poll, kept in the
//! runtime's `Watch` (what the watchdog's look at it in
//! `watchdog/starve.rs` fills in), and the [`Starved`] report that a
//! warning and a dump make of it.

use std::fmt::Write as _;
use std::time::Duration;

use crate::scheduler::fiber_id::{FiberId, describe};

/// The fibers a warning names, at most.
const NAMED: usize = 5;

/// The watchdog's record of a runtime's time without a poll; in its
/// [`Watch`](super::Watch), touched by the watchdog and by dumps, under
/// its lock.
#[derive(Default)]
pub(crate) struct Starve {
    /// The poll count of the window, and when the watchdog first saw it
    /// (ns; 0: no window).
    pub(crate) polls: u64,
    pub(crate) since: u64,
    /// The last look (ns), and the word it saw (unmarked), and who that was.
    pub(crate) last_at: u64,
    pub(crate) last_word: usize,
    pub(crate) last: Option<Who>,
    /// Time credited to each context seen in this window (ns).
    pub(crate) shares: Vec<(Who, u64)>,
    /// A stall warning was given in this window: it is that one's, not
    /// starvation.
    pub(crate) stalled: bool,
    /// The starvation of this window was warned about.
    pub(crate) warned: bool,
}

/// A context, as a warning names it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Who {
    pub(crate) id: FiberId,
    pub(crate) name: Option<String>,
    pub(crate) root: bool,
}

/// What a runtime that has not polled has done meanwhile: for how long,
/// and the contexts that took most of it, the longest first.
#[derive(Clone, Debug)]
pub(crate) struct Starved {
    pub(crate) for_: Duration,
    pub(crate) fibers: Vec<(String, Duration)>,
}

impl Starved {
    /// `fiber 'a' (#3) 52ms, fiber #4 48ms` (sampled times).
    pub(crate) fn list(&self) -> String {
        let mut out = String::new();
        for (i, (who, took)) in self.fibers.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(out, "{sep}{who} {took:.0?}");
        }
        out
    }
}

impl Starve {
    pub(crate) fn reset(&mut self, polls: u64, now: u64) {
        self.polls = polls;
        self.since = now;
        self.last_at = now;
        self.last_word = 0;
        self.last = None;
        self.shares.clear();
        self.stalled = false;
        self.warned = false;
    }

    pub(crate) fn report(&self, now: u64) -> Starved {
        let mut shares: Vec<&(Who, u64)> = self.shares.iter().collect();
        shares.sort_by_key(|(_, ns)| std::cmp::Reverse(*ns));
        Starved {
            for_: Duration::from_nanos(now.saturating_sub(self.since)),
            fibers: shares
                .iter()
                .take(NAMED)
                .map(|(w, ns)| {
                    (
                        describe(w.id, w.name.as_deref(), w.root),
                        Duration::from_nanos(*ns),
                    )
                })
                .collect(),
        }
    }
}
