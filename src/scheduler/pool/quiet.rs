//! What the workers of one runtime publish so that a deadlock of the whole
//! runtime can be told (`core/deadlock_workers.rs`), and the look that
//! tells it without a false report.
//!
//! A worker alone cannot tell: its fibers may wait on a lock that a fiber
//! of another worker holds and will release. The runtime is deadlocked
//! when *every* worker is *quiet* — all its fibers parked on fibra's own
//! primitives, nothing ready, no timer armed, no fd registered — at once,
//! no job is queued for any of them, no message (a wake-up) is on its way
//! to one, and nothing has changed for `stall_warning` × 10.
//!
//! ## Ground rules
//!
//! - Each worker has a [`Quiet`] record in its pool slot, which **only
//!   the worker's own thread writes**: it publishes `seq`, its park count
//!   (which grows at every park, wake-up and spawn of that worker: the
//!   same count means its fibers stand exactly as they stood), when it
//!   goes to wait for events with its fibers so; and clears it before it
//!   takes a job from its inbox or a message from its queue (in
//!   `Slot::take`, `Core::take_remote`), i.e. before anything those may
//!   wake. Senders write nothing here: a wake-up pays nothing for this.
//! - Readers read a record as a seqlock: `seq` (Acquire), the data, an
//!   acquire fence, `seq` again; the writer clears `seq`, issues a release
//!   fence, writes the data, then publishes `seq` (Release). A read that
//!   finds the same non-zero `seq` twice has the data of that `seq`. A
//!   worker that publishes the same `seq` again (it cleared it for a
//!   message that changed nothing: a dump request, a stale wake-up)
//!   publishes the same data: its `since` is kept.
//! - A worker publishes, issues a SeqCst fence, then looks at every other
//!   worker: whether a message was sent to it since it last took its
//!   messages (its `woken` flag, which it clears before it takes them),
//!   then its record. Of two workers that go quiet at once, one sees the
//!   other quiet with no message coming (the fences order them), so the
//!   last one to go quiet sees every worker quiet, and only it waits with
//!   a timeout to look again (an `epoll_wait` with a timeout costs the
//!   kernel a timer: fibers of two workers that hand work to each other
//!   through a channel find the other worker's message flag set at every
//!   hand-over, and wait without one). A worker that finds a message
//!   coming to another leaves the watch to it: woken, it goes quiet again
//!   after this one, and looks.
//!
//! ## Why a deadlock told is one
//!
//! [`WorkerLink::look_quiet`] reads every record twice (`r0`, `r1`) with,
//! between the two, a look at every inbox and message queue under its
//! lock. All reads of `r0` come before all of `r1`, so if each worker shows
//! the same `seq` in both, there is an instant at which all of them were
//! quiet together, their fibers as they had stood since `since`. At that
//! instant no fiber of the runtime runs, so any wake-up one of them sent
//! was queued before its worker published (happens-before the reader's
//! `r0` of that worker): at the look it is either still queued (seen: no
//! report), or was taken before the look, after its worker cleared its
//! record (ordered by the queue's lock before `r1`: `r1` differs, unless
//! it changed nothing). Only a thread outside the runtime (a plain thread,
//! another runtime) can still wake a fiber — which the warning says.

use std::sync::atomic::{AtomicU64, Ordering, fence};

use super::WorkerLink;
use crate::scheduler::shared::Shared;
use crate::timer::clock;

/// One worker's record (see the module docs).
#[derive(Default)]
pub(crate) struct Quiet {
    /// 0: not quiet; else the worker's park count when it went quiet.
    seq: AtomicU64,
    /// When (clock ns) the worker first published that count.
    since: AtomicU64,
    /// How many of its fibers wait on fibra's primitives.
    parked: AtomicU64,
}

/// A consistent read of a [`Quiet`] that was published.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Seen {
    seq: u64,
    since: u64,
    parked: u64,
}

impl Quiet {
    /// The writer (the worker's thread) publishes.
    fn publish(&self, seen: Seen) {
        // Orders the clear of `seq` before the data stores (see the
        // module docs: the seqlock).
        fence(Ordering::Release);
        self.since.store(seen.since, Ordering::Relaxed);
        self.parked.store(seen.parked, Ordering::Relaxed);
        self.seq.store(seen.seq, Ordering::Release);
        // Before the look at the others (see the module docs).
        fence(Ordering::SeqCst);
    }

    /// The writer is no longer quiet. A relaxed load when it was not.
    #[inline(always)]
    pub(crate) fn clear(&self) {
        // (Only this thread writes `seq`: the load is exact.)
        if self.seq.load(Ordering::Relaxed) != 0 {
            // (Ordered before the take by the lock it takes next: see
            // the module docs.)
            self.seq.store(0, Ordering::Release);
        }
    }

    /// A consistent read, if the record is published.
    fn read(&self) -> Option<Seen> {
        let seq = self.seq.load(Ordering::Acquire);
        if seq == 0 {
            return None;
        }
        let since = self.since.load(Ordering::Relaxed);
        let parked = self.parked.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == seq).then_some(Seen { seq, since, parked })
    }
}

/// What [`WorkerLink::look_quiet`] found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Look {
    /// Some worker is not quiet, or has a job or a message waiting, or no
    /// fiber waits at all.
    NotAll,
    /// All are quiet, not yet for long enough: look again in so many ns.
    Wait(u64),
    /// Deadlocked: every fiber (`fibers` of them) has waited `waited_ns`.
    /// `fingerprint` names this state, so that it is told once.
    Deadlocked {
        waited_ns: u64,
        fibers: u64,
        fingerprint: u64,
    },
}

impl<J> WorkerLink<J> {
    /// This worker waits for events with every fiber parked on fibra's
    /// primitives (`parked` of them) and its park count at `seq`: publishes
    /// so, unless it still is published.
    pub(crate) fn enter_quiet(&self, seq: u64, parked: u64) {
        let quiet = &self.slot.quiet;
        if quiet.seq.load(Ordering::Relaxed) == seq {
            return; // (only this thread writes it; looked after it)
        }
        let (last, since) = self.quiet_last.get();
        // The same count as last published: nothing changed since then.
        let since = if last == seq { since } else { clock::now_ns() };
        self.quiet_last.set((seq, since));
        quiet.publish(Seen { seq, since, parked });
    }

    /// This worker is no longer quiet.
    pub(crate) fn leave_quiet(&self) {
        self.slot.quiet.clear();
    }

    /// Whether the runtime is deadlocked, `after_ns` being how long every
    /// worker must have stood still (see the module docs). Called by a
    /// worker right after it published its record, and again when the
    /// time a look asked it to wait has passed.
    pub(crate) fn look_quiet(&self, after_ns: u64) -> Look {
        // A first pass that stores nothing: most looks end here, at the
        // first flag of a message coming (a line the sender has just
        // written: as cheap as it gets) or record not published.
        let (mut latest, mut fibers) = (0, 0);
        for (i, slot) in self.pool.slots.iter().enumerate() {
            if i != self.index && slot.shared.get().is_some_and(|s| s.has_news()) {
                return Look::NotAll;
            }
            let Some(seen) = slot.quiet.read() else {
                return Look::NotAll;
            };
            latest = latest.max(seen.since);
            fibers += seen.parked;
        }
        if fibers == 0 {
            return Look::NotAll;
        }
        let now = clock::now_ns();
        let due = latest.saturating_add(after_ns);
        if now < due {
            return Look::Wait(due - now);
        }
        self.confirm(now)
    }

    /// The look's second part: `r0`, the queues, `r1` (module docs).
    #[cold]
    #[inline(never)]
    fn confirm(&self, now: u64) -> Look {
        let slots = &self.pool.slots;
        let mut r0 = Vec::with_capacity(slots.len());
        for slot in slots.iter() {
            match slot.quiet.read() {
                Some(seen) => r0.push(seen),
                None => return Look::NotAll,
            }
        }
        for slot in slots.iter() {
            if slot.lock().len() != 0 || slot.shared.get().is_some_and(|s| s.has_messages()) {
                return Look::NotAll;
            }
        }
        let mut fingerprint = 0u64;
        for (slot, first) in slots.iter().zip(&r0) {
            if slot.quiet.read() != Some(*first) {
                return Look::NotAll;
            }
            fingerprint = fingerprint.rotate_left(23) ^ first.seq;
            fingerprint = fingerprint.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
        let fingerprint = fingerprint | 1; // 0 is "none told yet"
        let latest = r0.iter().map(|s| s.since).max().unwrap_or(now);
        Look::Deadlocked {
            waited_ns: now.saturating_sub(latest),
            fibers: r0.iter().map(|s| s.parked).sum(),
            fingerprint,
        }
    }

    /// Whether the deadlock `fingerprint` names is still to be told (then
    /// the caller tells it): true once per deadlock, for one worker.
    pub(crate) fn tell_deadlock(&self, fingerprint: u64) -> bool {
        self.pool.deadlock_told.swap(fingerprint, Ordering::Relaxed) != fingerprint
    }

    /// The runtimes of the other workers, by worker index, for a dump.
    pub(crate) fn siblings(&self) -> Vec<(usize, std::sync::Arc<Shared>)> {
        self.pool
            .slots
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != self.index)
            .filter_map(|(i, slot)| slot.shared.get().map(|s| (i, s.clone())))
            .collect()
    }
}
