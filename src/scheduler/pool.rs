//! The inboxes of a runtime of several workers, through which fibers that
//! have not started reach the workers, and the rules by which jobs are
//! spread, stolen and waited for. A pool moves jobs (any `J`: in fibra,
//! the `Job` of `core/job.rs`) between threads and knows nothing of
//! fibers, nor of the scheduler that starts them.
//!
//! Each worker is a plain current-thread scheduler (`Core`) on a thread of
//! its own (`fibra-worker-N`, started by `workers.rs`) that holds a
//! [`WorkerLink`] to the pool; the scheduler's side of what follows
//! (starting the jobs it takes, sleeping when it finds none) is
//! `core/worker.rs`. Nothing of a started fiber is ever shared between
//! workers: what crosses threads is a job (a `Send` closure plus the
//! fiber's end of its join packet) in a worker's inbox.
//!
//! ## Spreading and stealing
//!
//! [`Pool::submit`] puts a job in the inbox of an idle worker if there is
//! one, else of the next worker in turn. A worker takes jobs from its own
//! inbox in batches whenever it polls; a worker with nothing to run takes
//! up to half of another worker's inbox before it sleeps. So a worker stuck
//! in long work does not hold back the jobs sent to it, while a fiber that
//! has started stays where it is. Jobs sent to a given worker
//! ([`Runtime::spawn_on`](crate::Runtime::spawn_on)) are never taken.
//!
//! A worker is robbed only when it is busy: running (not asleep, and not
//! just woken or started and waiting for its thread to get a core) and
//! without a look at its inbox for [`STEAL_AFTER`] (a fiber computing
//! without blocking, say). Robbing a worker that merely has not woken yet
//! would let the first worker to wake take every job of a burst while the
//! others sit idle. A thief that sees jobs it may not take yet sleeps at
//! most that long before it looks again.
//!
//! A worker counts its looks; it does not time them. A worker that goes
//! idle looks at its inbox three times (before it says so, after, and when
//! it wakes), at one connection that is every round trip, and the clock
//! reads were 80 of the 1 660 instructions of such a trip. The thief keeps the
//! count it last saw of each worker and when it first saw it: a count
//! that has stood still for [`STEAL_AFTER`] is a worker that has not
//! looked for that long.
//!
//! ## Sleeping and waking without lost wake-ups
//!
//! A worker about to sleep in `epoll_wait` sets its state to [`IDLE`], then
//! looks at every inbox once more; a submitter pushes its job, then claims
//! an idle worker (`IDLE` to `WAKING`) and wakes its eventfd. A SeqCst fence
//! on each side between the write and the read means at least one of them
//! sees the other: the job is found, or the sleeper is woken. Running
//! workers are never woken (they look at their inbox at their next poll),
//! so submitting to them costs no syscall.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::scheduler::shared::Shared;
use crate::timer::clock;

mod quiet;
pub(crate) use quiet::Look;
use quiet::Quiet;

/// How many jobs a worker takes from an inbox at a time.
const JOB_BATCH: usize = 64;

/// How long a worker may leave its inbox unlooked-at before idle workers
/// take its jobs (see the module docs).
pub(crate) const STEAL_AFTER: Duration = Duration::from_millis(1);

/// A worker's state: running fibers or polling.
const RUNNING: u8 = 0;
/// Asleep (or about to sleep) in `epoll_wait`, and nobody woke it yet.
const IDLE: u8 = 1;
/// Woken to take the jobs sent to it (or just started), and not running
/// yet.
const WAKING: u8 = 2;

/// What the workers of one runtime share.
pub(crate) struct Pool<J> {
    /// (Each in an `Arc` of its own: a worker keeps its own slot's, and
    /// reaches it with one load, where an index into the pool's slice was
    /// a bounds check and a shift at each of a dozen uses a round trip.)
    slots: Box<[Arc<Slot<J>>]>,
    /// The next worker in turn for [`Pool::submit`].
    next: AtomicUsize,
    /// The runtime is being dropped.
    stop: AtomicBool,
    /// The fingerprint of the deadlock told last (see `pool/quiet.rs`).
    deadlock_told: AtomicU64,
}

/// One worker's part of the pool. Each worker writes its own at every
/// poll (`looked`, its figures) and the others read it: aligned to 128
/// bytes (two lines, which x86's adjacent-line prefetch moves together),
/// so that a worker's writes never evict a line another worker writes.
#[repr(align(128))]
struct Slot<J> {
    inbox: Mutex<Inbox<J>>,
    /// `inbox`'s length, readable without the lock.
    queued: AtomicUsize,
    /// Of those, the jobs other workers may take.
    stealable: AtomicUsize,
    /// How many times the worker has looked at its inbox (see the module
    /// docs); only the worker writes it.
    looks: AtomicU64,
    /// [`RUNNING`], [`IDLE`] or [`WAKING`].
    state: AtomicU8,
    /// The worker's runtime, to wake it; set once the worker has started.
    shared: OnceLock<Arc<Shared>>,
    metrics: Published,
    /// Whether the worker waits with all its fibers parked on fibra's
    /// primitives (see `pool/quiet.rs`); only the worker writes it.
    quiet: Quiet,
}

struct Inbox<J> {
    /// Jobs any worker may take.
    shared: VecDeque<J>,
    /// Jobs for this worker only.
    pinned: VecDeque<J>,
}

impl<J> Default for Inbox<J> {
    fn default() -> Self {
        Inbox {
            shared: VecDeque::new(),
            pinned: VecDeque::new(),
        }
    }
}

impl<J> Inbox<J> {
    fn len(&self) -> usize {
        self.shared.len() + self.pinned.len()
    }
}

/// A worker's figures as it last published them (at every poll).
#[derive(Default)]
struct Published {
    alive: AtomicUsize,
    ready: AtomicUsize,
    stolen: AtomicU64,
}

impl<J> Pool<J> {
    pub(crate) fn new(workers: usize) -> Pool<J> {
        Pool {
            slots: (0..workers)
                .map(|_| {
                    Arc::new(Slot {
                        inbox: Mutex::new(Inbox::default()),
                        queued: AtomicUsize::new(0),
                        stealable: AtomicUsize::new(0),
                        looks: AtomicU64::new(0),
                        state: AtomicU8::new(WAKING),
                        shared: OnceLock::new(),
                        metrics: Published::default(),
                        quiet: Quiet::default(),
                    })
                })
                .collect(),
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            deadlock_told: AtomicU64::new(0),
        }
    }

    pub(crate) fn workers(&self) -> usize {
        self.slots.len()
    }

    /// Hands a job to a worker: `pinned_to`, or the one [`pick`](Self::pick) chooses.
    pub(crate) fn submit(&self, job: J, pinned_to: Option<usize>) {
        let target = pinned_to.unwrap_or_else(|| self.pick());
        let slot = &self.slots[target];
        {
            let mut inbox = slot.lock();
            match pinned_to {
                Some(_) => inbox.pinned.push_back(job),
                None => inbox.shared.push_back(job),
            }
            slot.counts(&inbox);
        }
        // Pairs with the fence in `WorkerLink::go_idle`.
        fence(Ordering::SeqCst);
        if slot.claim_idle() {
            return;
        }
        if pinned_to.is_none() {
            // The target is busy: wake an idle worker to take the job.
            let n = self.slots.len();
            let _ = (1..n).any(|i| self.slots[(target + i) % n].claim_idle());
        }
    }

    /// The next worker in turn, or an idle one if there is one.
    fn pick(&self) -> usize {
        let n = self.slots.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        (0..n)
            .map(|i| (start + i) % n)
            .find(|&i| self.slots[i].state.load(Ordering::Relaxed) == IDLE)
            .unwrap_or(start)
    }

    pub(crate) fn metrics(&self) -> Vec<crate::scheduler::metrics::WorkerMetrics> {
        self.slots
            .iter()
            .enumerate()
            .map(|(worker, slot)| {
                let alive = slot.metrics.alive.load(Ordering::Relaxed);
                let ready = slot.metrics.ready.load(Ordering::Relaxed).min(alive);
                crate::scheduler::metrics::WorkerMetrics {
                    worker,
                    alive,
                    ready,
                    parked: alive - ready,
                    queued: slot.queued.load(Ordering::Relaxed),
                    stolen: slot.metrics.stolen.load(Ordering::Relaxed),
                }
            })
            .collect()
    }

    /// Each worker's thread name and runtime, for dumps.
    pub(crate) fn runtimes(&self) -> Vec<(String, Arc<Shared>)> {
        self.slots
            .iter()
            .filter_map(|slot| slot.shared.get())
            .map(|shared| (shared.thread_name.clone(), shared.clone()))
            .collect()
    }

    /// Asks every worker to stop: each cancels its fibers and exits.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for slot in self.slots.iter() {
            if let Some(shared) = slot.shared.get() {
                shared.wake_fd();
            }
        }
    }
}

impl<J> Slot<J> {
    fn lock(&self) -> MutexGuard<'_, Inbox<J>> {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the worker if it sleeps and nobody woke it yet.
    fn claim_idle(&self) -> bool {
        if self.state.load(Ordering::Relaxed) == IDLE
            && self
                .state
                .compare_exchange(IDLE, WAKING, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        {
            if let Some(shared) = self.shared.get() {
                shared.wake_fd();
            }
            return true;
        }
        false
    }

    fn counts(&self, inbox: &Inbox<J>) {
        self.queued.store(inbox.len(), Ordering::Relaxed);
        self.stealable.store(inbox.shared.len(), Ordering::Relaxed);
    }

    /// Takes up to `max` of this worker's own jobs, the pinned ones first.
    /// `None` when there are none. Called by the worker only.
    #[inline]
    fn take_own(&self, max: usize) -> Option<Vec<J>> {
        // (A load and a store, not an atomic add: no other thread writes it.)
        let looks = self.looks.load(Ordering::Relaxed);
        self.looks.store(looks.wrapping_add(1), Ordering::Relaxed);
        if self.queued.load(Ordering::Relaxed) == 0 {
            return None;
        }
        // Before the take: a job may change the worker's fibers.
        self.quiet.clear();
        Some(self.take(max, true))
    }

    /// Takes up to half of the jobs other workers may take, if this worker
    /// is busy (see the module docs); `seen` is the thief's record of this
    /// worker's looks: the count it last saw, and when it first saw it.
    /// `Ok(None)`: there are none; `Err(())`: there are some, not yet
    /// takable.
    fn take_stealable(&self, max: usize, seen: &Cell<Seen>) -> Result<Option<Vec<J>>, ()> {
        if self.stealable.load(Ordering::Relaxed) == 0 {
            return Ok(None);
        }
        if self.state.load(Ordering::Relaxed) != RUNNING {
            return Err(());
        }
        let looks = self.looks.load(Ordering::Relaxed);
        let now = clock::now_ns();
        let last = seen.get();
        if looks != last.looks {
            // It has looked since: from now on it may be stuck.
            seen.set(Seen { looks, since: now });
            return Err(());
        }
        if now.saturating_sub(last.since) < STEAL_AFTER.as_nanos() as u64 {
            return Err(());
        }
        Ok(Some(self.take(max, false)))
    }

    fn take(&self, max: usize, own: bool) -> Vec<J> {
        let mut into = Vec::new();
        let mut inbox = self.lock();
        if own {
            while into.len() < max
                && let Some(job) = inbox.pinned.pop_front()
            {
                into.push(job);
            }
        }
        let wanted = if own {
            max - into.len()
        } else {
            // Leave the owner half, rounding in the thief's favour.
            inbox.shared.len().div_ceil(2).min(max)
        };
        let wanted = wanted.min(inbox.shared.len());
        into.extend(inbox.shared.drain(..wanted));
        self.counts(&inbox);
        into
    }
}

/// What a thief last saw of another worker's looks (see the module docs).
#[derive(Clone, Copy)]
struct Seen {
    looks: u64,
    /// When (clock ns) it first saw that count.
    since: u64,
}

/// A worker's handle on its pool, kept in its scheduler (`Core`).
pub(crate) struct WorkerLink<J> {
    pool: Arc<Pool<J>>,
    index: usize,
    /// Its own slot, `pool.slots[index]`.
    slot: Arc<Slot<J>>,
    /// What this worker last saw of each worker's looks, as a thief.
    seen: Box<[Cell<Seen>]>,
    /// The park count and time this worker last published as quiet (see
    /// `pool/quiet.rs`).
    quiet_last: Cell<(u64, u64)>,
}

impl<J> Clone for WorkerLink<J> {
    fn clone(&self) -> Self {
        WorkerLink {
            pool: self.pool.clone(),
            index: self.index,
            slot: self.slot.clone(),
            seen: self.seen.clone(),
            quiet_last: self.quiet_last.clone(),
        }
    }
}

impl<J> WorkerLink<J> {
    /// The pool this worker belongs to.
    pub(crate) fn pool(&self) -> &Arc<Pool<J>> {
        &self.pool
    }

    /// Worker `index`'s link to `pool`.
    pub(crate) fn new(pool: Arc<Pool<J>>, index: usize) -> WorkerLink<J> {
        // (No count is `u64::MAX` for long: the first sight of each worker
        // only takes its count.)
        let unseen = Seen {
            looks: u64::MAX,
            since: 0,
        };
        let seen = (0..pool.slots.len()).map(|_| Cell::new(unseen)).collect();
        let slot = pool.slots[index].clone();
        WorkerLink {
            pool,
            index,
            slot,
            seen,
            quiet_last: Cell::new((0, 0)),
        }
    }

    #[inline]
    fn slot(&self) -> &Slot<J> {
        &self.slot
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }

    pub(crate) fn stopping(&self) -> bool {
        self.pool.stop.load(Ordering::Relaxed)
    }

    /// Takes a batch of jobs from this worker's own inbox, if it has any.
    /// Called at every poll. (`None` rather than an empty vector: every
    /// poll of a worker with nothing queued, at one connection every round
    /// trip, would build and drop one.)
    #[inline]
    pub(crate) fn take_own(&self) -> Option<Vec<J>> {
        self.slot().take_own(JOB_BATCH)
    }

    /// Whether any other worker has jobs others may take (taken or not:
    /// see [`WorkerLink::steal`]).
    #[inline]
    pub(crate) fn others_have_stealable(&self) -> bool {
        let slots = &self.pool.slots;
        slots[..self.index]
            .iter()
            .chain(&slots[self.index + 1..])
            .any(|slot| slot.stealable.load(Ordering::Relaxed) != 0)
    }

    /// Takes jobs another worker has not started yet, if there are any.
    /// `Err(())`: none taken, but some may be soon.
    #[inline(never)]
    pub(crate) fn steal(&self) -> Result<Option<Vec<J>>, ()> {
        let n = self.pool.slots.len();
        let mut later = false;
        // The other workers, from the next one round (no division).
        for at in (self.index + 1..n).chain(0..self.index) {
            match self.pool.slots[at].take_stealable(JOB_BATCH, &self.seen[at]) {
                Ok(Some(jobs)) if !jobs.is_empty() => {
                    let stolen = jobs.len() as u64;
                    self.slot()
                        .metrics
                        .stolen
                        .fetch_add(stolen, Ordering::Relaxed);
                    tracing::debug!(worker = self.index, stolen, "took unstarted fibers");
                    return Ok(Some(jobs));
                }
                Ok(_) => {}
                Err(()) => later = true,
            }
        }
        if later { Err(()) } else { Ok(None) }
    }

    /// The worker is about to sleep: it says so, then (the caller) looks
    /// at every inbox once more (see the module docs).
    pub(crate) fn go_idle(&self) {
        // Relaxed: the fence below orders it before the looks that follow,
        // and pairs with the fence in `Pool::submit` (a store, a SeqCst
        // fence, a load on each side: at least one side sees the other's
        // store). A SeqCst store on top was a second full barrier (an
        // `xchg` before the `mfence`) at every idle turn of a worker.
        self.slot().state.store(IDLE, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// The worker runs (again): it has found work, or woken, or started.
    pub(crate) fn run(&self) {
        self.slot().state.store(RUNNING, Ordering::Relaxed);
    }

    /// Publishes the worker's figures for [`Pool::metrics`].
    pub(crate) fn publish(&self, alive: usize, ready: usize) {
        let m = &self.slot().metrics;
        // Stored only when they change: a store takes the line from the
        // workers that read it, even one that changes nothing.
        if m.alive.load(Ordering::Relaxed) != alive {
            m.alive.store(alive, Ordering::Relaxed);
        }
        if m.ready.load(Ordering::Relaxed) != ready {
            m.ready.store(ready, Ordering::Relaxed);
        }
    }

    /// The worker's scheduler is up: `shared` is its runtime, to wake it.
    pub(crate) fn started(&self, shared: Arc<Shared>) {
        let _ = self.slot().shared.set(shared);
    }

    /// The worker has stopped: the jobs still queued for it are dropped
    /// unrun (their handles report them cancelled), and its figures are
    /// zeroed.
    pub(crate) fn drop_unstarted(&self) {
        let slot = self.slot();
        let left = std::mem::take(&mut *slot.lock());
        slot.counts(&Inbox::default());
        drop(left);
        slot.metrics.alive.store(0, Ordering::Relaxed);
        slot.metrics.ready.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
