//! The machinery of a runtime of several workers: one scheduler per
//! thread, and the inboxes through which fibers that have not started
//! reach them.
//!
//! Each worker is a plain current-thread [`Core`] on a thread of its own
//! (`fibra-worker-N`), driven by [`worker_main`] until the runtime is
//! dropped. Nothing of a started fiber is ever shared between workers:
//! what crosses threads is a [`Job`] (a `Send` closure plus the fiber's end
//! of its join packet) in a worker's inbox.
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
//! ## Sleeping and waking without lost wake-ups
//!
//! A worker about to sleep in `epoll_wait` sets its state to [`IDLE`], then
//! looks at every inbox once more; a submitter pushes its job, then claims
//! an idle worker (`IDLE` to `WAKING`) and wakes its eventfd. A SeqCst fence
//! on each side between the write and the read means at least one of them
//! sees the other: the job is found, or the sleeper is woken. Running
//! workers are never woken (they look at their inbox at their next poll),
//! so submitting to them costs no syscall.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::Duration;

use crate::runtime::context::Enter;
use crate::runtime::core::{Core, Tuning, Until};
use crate::runtime::job::Job;
use crate::runtime::shared::Shared;
use crate::time::clock;

/// How many jobs a worker takes from an inbox at a time.
const JOB_BATCH: usize = 64;

/// How long a worker may leave its inbox unlooked-at before idle workers
/// take its jobs (see the module docs).
const STEAL_AFTER: Duration = Duration::from_millis(1);

/// A worker's state: running fibers or polling.
const RUNNING: u8 = 0;
/// Asleep (or about to sleep) in `epoll_wait`, and nobody woke it yet.
const IDLE: u8 = 1;
/// Woken to take the jobs sent to it (or just started), and not running
/// yet.
const WAKING: u8 = 2;

/// What the workers of one runtime share.
pub(crate) struct Pool {
    slots: Box<[Slot]>,
    /// The next worker in turn for [`Pool::submit`].
    next: AtomicUsize,
    /// The runtime is being dropped.
    stop: AtomicBool,
}

/// One worker's part of the pool.
struct Slot {
    inbox: Mutex<Inbox>,
    /// `inbox`'s length, readable without the lock.
    queued: AtomicUsize,
    /// Of those, the jobs other workers may take.
    stealable: AtomicUsize,
    /// When (clock ns) the worker last looked at its inbox.
    looked: AtomicU64,
    /// [`RUNNING`], [`IDLE`] or [`WAKING`].
    state: AtomicU8,
    /// The worker's runtime, to wake it; set once the worker has started.
    shared: OnceLock<Arc<Shared>>,
    metrics: Published,
}

#[derive(Default)]
struct Inbox {
    /// Jobs any worker may take.
    shared: VecDeque<Job>,
    /// Jobs for this worker only.
    pinned: VecDeque<Job>,
}

impl Inbox {
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

impl Pool {
    /// Starts `n` workers and waits until each has its scheduler.
    ///
    /// One at a time: a worker is started only once the one before has
    /// reported, so the first that fails (no thread, or no fds for its
    /// reactor) ends the start with its error, and the workers already up
    /// are stopped and joined. (Starting them all before reading any
    /// report ran on past the limits until std could not map a thread's
    /// signal stack, and aborted the process.)
    pub(crate) fn start(
        n: usize,
        stack_size: usize,
        tuning: Tuning,
    ) -> io::Result<(Arc<Pool>, Vec<thread::JoinHandle<()>>)> {
        let pool = Arc::new(Pool::new(n));
        let mut threads = Vec::with_capacity(n);
        let mut failure = None;
        for index in 0..n {
            let link = WorkerLink {
                pool: pool.clone(),
                index,
            };
            let (report, started) = std::sync::mpsc::channel();
            match thread::Builder::new()
                .name(format!("fibra-worker-{index}"))
                .spawn(move || worker_main(link, stack_size, tuning, report))
            {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
            // A worker that failed reports its error; one that panicked
            // drops its sender, which ends the wait with RecvError.
            match started.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    failure = Some(e);
                    break;
                }
                Err(_) => {
                    failure = Some(io::Error::other(format!(
                        "fibra worker {index} failed to start"
                    )));
                    break;
                }
            }
        }
        if let Some(e) = failure {
            pool.stop();
            for thread in threads {
                let _ = thread.join();
            }
            return Err(e);
        }
        Ok((pool, threads))
    }

    fn new(workers: usize) -> Pool {
        Pool {
            slots: (0..workers)
                .map(|_| Slot {
                    inbox: Mutex::new(Inbox::default()),
                    queued: AtomicUsize::new(0),
                    stealable: AtomicUsize::new(0),
                    looked: AtomicU64::new(clock::now_ns()),
                    state: AtomicU8::new(WAKING),
                    shared: OnceLock::new(),
                    metrics: Published::default(),
                })
                .collect(),
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        }
    }

    pub(crate) fn workers(&self) -> usize {
        self.slots.len()
    }

    /// Hands a job to a worker: `pinned_to`, or the one [`pick`](Self::pick) chooses.
    pub(crate) fn submit(&self, job: Job, pinned_to: Option<usize>) {
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
        // Pairs with the fence in `WorkerLink::wait_for_work`.
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

    pub(crate) fn metrics(&self) -> Vec<crate::runtime::metrics::WorkerMetrics> {
        self.slots
            .iter()
            .enumerate()
            .map(|(worker, slot)| {
                let alive = slot.metrics.alive.load(Ordering::Relaxed);
                let ready = slot.metrics.ready.load(Ordering::Relaxed).min(alive);
                crate::runtime::metrics::WorkerMetrics {
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

impl Slot {
    fn lock(&self) -> MutexGuard<'_, Inbox> {
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

    fn counts(&self, inbox: &Inbox) {
        self.queued.store(inbox.len(), Ordering::Relaxed);
        self.stealable.store(inbox.shared.len(), Ordering::Relaxed);
    }

    /// Takes up to `max` of this worker's own jobs, the pinned ones first.
    fn take_own(&self, max: usize, into: &mut Vec<Job>) {
        self.looked.store(clock::now_ns(), Ordering::Relaxed);
        if self.queued.load(Ordering::Relaxed) > 0 {
            self.take(max, true, into);
        }
    }

    /// Takes up to half of the jobs other workers may take, if this worker
    /// is busy (see the module docs). `Err(())`: there are some, not yet
    /// takable.
    fn take_stealable(&self, max: usize, into: &mut Vec<Job>) -> Result<(), ()> {
        if self.stealable.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        let looked = self.looked.load(Ordering::Relaxed);
        if self.state.load(Ordering::Relaxed) != RUNNING
            || clock::now_ns().saturating_sub(looked) < STEAL_AFTER.as_nanos() as u64
        {
            return Err(());
        }
        self.take(max, false, into);
        Ok(())
    }

    fn take(&self, max: usize, own: bool, into: &mut Vec<Job>) {
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
    }
}

/// A worker's handle on its pool, kept in its [`Core`].
pub(crate) struct WorkerLink {
    pool: Arc<Pool>,
    index: usize,
}

impl WorkerLink {
    fn slot(&self) -> &Slot {
        &self.pool.slots[self.index]
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }

    pub(crate) fn stopping(&self) -> bool {
        self.pool.stop.load(Ordering::Relaxed)
    }

    /// Starts a batch of jobs from this worker's own inbox; returns whether
    /// there were any. Called at every poll.
    pub(crate) fn start_own(&self, core: &Core) -> bool {
        let mut jobs = Vec::new();
        self.slot().take_own(JOB_BATCH, &mut jobs);
        start_all(jobs, core)
    }

    /// Takes jobs another worker has not started yet. `Err(())`: none
    /// taken, but some may be soon.
    fn steal(&self, core: &Core) -> Result<bool, ()> {
        let n = self.pool.slots.len();
        let mut jobs = Vec::new();
        let mut later = false;
        for i in 1..n {
            let victim = &self.pool.slots[(self.index + i) % n];
            later |= victim.take_stealable(JOB_BATCH, &mut jobs).is_err();
            if !jobs.is_empty() {
                let stolen = jobs.len() as u64;
                self.slot()
                    .metrics
                    .stolen
                    .fetch_add(stolen, Ordering::Relaxed);
                tracing::debug!(worker = self.index, stolen, "took unstarted fibers");
                return Ok(start_all(jobs, core));
            }
        }
        if later { Err(()) } else { Ok(false) }
    }

    /// Called when no fiber of this worker is ready: finds jobs, or sleeps
    /// until something happens (see the module docs).
    pub(crate) fn wait_for_work(&self, core: &Core, closing: bool) {
        if closing {
            core.poll(None); // shutting down: no new fibers
            return;
        }
        if self.start_own(core) || self.steal(core) == Ok(true) {
            return;
        }
        let slot = self.slot();
        slot.state.store(IDLE, Ordering::SeqCst);
        // Pairs with the fence in `Pool::submit`.
        fence(Ordering::SeqCst);
        let stolen = self.steal(core);
        if self.start_own(core) || stolen == Ok(true) || self.stopping() {
            slot.state.store(RUNNING, Ordering::Relaxed);
            return;
        }
        let (alive, ready) = core.figures();
        self.publish(alive, ready); // as they stay while it sleeps
        // Jobs elsewhere that are not takable yet: look again then.
        core.poll(stolen.err().map(|()| STEAL_AFTER));
        slot.state.store(RUNNING, Ordering::Relaxed);
    }

    /// Publishes the worker's figures for [`Pool::metrics`].
    pub(crate) fn publish(&self, alive: usize, ready: usize) {
        let m = &self.slot().metrics;
        m.alive.store(alive, Ordering::Relaxed);
        m.ready.store(ready, Ordering::Relaxed);
    }
}

fn start_all(jobs: Vec<Job>, core: &Core) -> bool {
    let any = !jobs.is_empty();
    for job in jobs {
        job.start(core);
    }
    any
}

/// A worker thread: its scheduler runs until the runtime is dropped, then
/// cancels its fibers and drops the jobs nobody started.
fn worker_main(
    link: WorkerLink,
    stack_size: usize,
    tuning: Tuning,
    report: std::sync::mpsc::Sender<io::Result<()>>,
) {
    let index = link.index;
    let pool = link.pool.clone();
    let core = match Core::new(stack_size, tuning, Some(link)) {
        Ok(core) => core,
        Err(e) => {
            let _ = report.send(Err(e));
            return;
        }
    };
    crate::runtime::watchdog::install_panic_hook();
    let slot = &pool.slots[index];
    let _ = slot.shared.set(core.shared.clone());
    let _ = report.send(Ok(()));
    drop(report);

    let span = tracing::debug_span!("fibra-worker", worker = index);
    let _span = span.enter();
    let enter = Enter::nested(&core);
    slot.state.store(RUNNING, Ordering::Relaxed); // up: no longer WAKING
    core.run_root(Until::Stopped);
    drop(enter);
    crate::runtime::context::close(&core);
    // Jobs still queued here are dropped unrun: their handles report them
    // cancelled.
    let left = std::mem::take(&mut *slot.lock());
    slot.counts(&Inbox::default());
    drop(left);
    slot.metrics.alive.store(0, Ordering::Relaxed);
    slot.metrics.ready.store(0, Ordering::Relaxed);
}
