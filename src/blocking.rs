//! [`spawn_blocking`]: run blocking work (files, DNS, heavy computation) on
//! a pool of threads while the fiber parks.
//!
//! The pool grows a thread at a time when work arrives and no thread is
//! idle, up to [`MAX_THREADS`], and a thread that stays idle for
//! [`KEEP_ALIVE`] exits, so an idle process keeps no threads around.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::runtime::context;
use crate::runtime::park::{Unparker, WaitOn};

/// The most threads the pool runs at once; more work waits in a queue.
pub const MAX_THREADS: usize = 512;

/// How long an idle pool thread waits for work before it exits.
pub const KEEP_ALIVE: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

struct Pool {
    state: Mutex<State>,
    work: Condvar,
}

struct State {
    queue: VecDeque<Job>,
    threads: usize,
    idle: usize,
}

static POOL: Pool = Pool {
    state: Mutex::new(State {
        queue: VecDeque::new(),
        threads: 0,
        idle: 0,
    }),
    work: Condvar::new(),
};

fn lock() -> std::sync::MutexGuard<'static, State> {
    POOL.state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Queues a job, starting a thread for it if none is idle.
fn submit(job: Job) {
    let mut state = lock();
    state.queue.push_back(job);
    if state.idle > 0 {
        POOL.work.notify_one();
        return;
    }
    if state.threads >= MAX_THREADS {
        return; // a busy thread takes it when it is done
    }
    state.threads += 1;
    drop(state);
    let spawned = std::thread::Builder::new()
        .name("fibra-blocking".into())
        .spawn(worker);
    if let Err(e) = spawned {
        let mut state = lock();
        state.threads -= 1;
        if state.threads == 0 {
            // No thread can run the queue: run it here rather than never.
            tracing::warn!(error = %e, "no blocking-pool thread: running blocking work inline");
            let jobs: Vec<Job> = state.queue.drain(..).collect();
            drop(state);
            jobs.into_iter().for_each(|job| job());
        }
    }
}

fn worker() {
    let mut state = lock();
    loop {
        if let Some(job) = state.queue.pop_front() {
            drop(state);
            job(); // never unwinds: jobs catch their panics
            state = lock();
            continue;
        }
        state.idle += 1;
        let (next, timeout) = POOL
            .work
            .wait_timeout(state, KEEP_ALIVE)
            .unwrap_or_else(|e| e.into_inner());
        state = next;
        state.idle -= 1;
        if timeout.timed_out() && state.queue.is_empty() {
            state.threads -= 1;
            return;
        }
    }
}

/// Where a job leaves its outcome for the waiting context, and whom to
/// wake. The waiter is refreshed before every park (a park can end without
/// the job, on cancellation, and the next park has a new token), under the
/// same lock the job takes to store the outcome, so no wake-up is lost.
type Slot<T> = Arc<Mutex<SlotState<T>>>;

struct SlotState<T> {
    outcome: Option<Result<T, Box<dyn Any + Send>>>,
    waiter: Unparker,
}

fn new_slot<T>() -> Slot<T> {
    Arc::new(Mutex::new(SlotState {
        outcome: None,
        waiter: Unparker::current(),
    }))
}

/// Runs `f`, then stores its outcome and wakes the waiter.
fn complete<T>(slot: &Slot<T>, f: impl FnOnce() -> T) {
    let outcome = panic::catch_unwind(AssertUnwindSafe(f));
    let waiter = {
        let mut state = slot.lock().unwrap_or_else(|e| e.into_inner());
        state.outcome = Some(outcome);
        state.waiter.clone()
    };
    waiter.unpark();
}

/// Waits for the outcome with `park`, re-raising a panic of the job.
///
/// The job may have stored the outcome and be about to wake the token it
/// saw before this side ever parked on it: so the token is retired on the
/// way out, and that late wake-up finds it stale.
fn wait<T>(slot: &Slot<T>, mut park: impl FnMut()) -> T {
    loop {
        {
            let mut state = slot.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(outcome) = state.outcome.take() {
                drop(state);
                crate::runtime::park::retire_token();
                return match outcome {
                    Ok(value) => value,
                    Err(payload) => panic::resume_unwind(payload),
                };
            }
            state.waiter = Unparker::current();
        }
        park();
    }
}

/// Runs `f` on the blocking pool and returns its result, parking the
/// calling fiber meanwhile (other fibers run). Outside a runtime it simply
/// runs `f` on the calling thread, which blocks either way.
///
/// A panic in `f` is re-raised here. If the fiber is cancelled (or its
/// [`timeout`](crate::timeout) expires) while it waits, it unwinds at once;
/// `f` runs on to its end and its result is dropped.
///
/// ```
/// fibra::run(|| {
///     let ticker = fibra::spawn(|| fibra::sleep(std::time::Duration::from_millis(10)));
///     // A blocking call that would stall every fiber if run inline:
///     let n = fibra::spawn_blocking(|| {
///         std::thread::sleep(std::time::Duration::from_millis(30));
///         42
///     });
///     assert_eq!(n, 42);
///     assert!(ticker.is_finished()); // it ran while we waited
/// });
/// ```
pub fn spawn_blocking<F, T>(f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    if context::current().is_none() {
        return f();
    }
    let slot = new_slot();
    let job_slot = slot.clone();
    submit(Box::new(move || complete(&job_slot, f)));
    wait(&slot, || {
        crate::runtime::park::park_current(None, WaitOn::Blocking);
    })
}

/// Runs `f`, which may borrow from the caller, on the blocking pool (from
/// a fiber) or right here (outside a runtime), and waits for it *without*
/// unwinding: cancellation and timeouts take effect at the fiber's next
/// park, after `f` is done with its borrows. Used for host-name lookups.
pub(crate) fn run_borrowing<F, T>(f: F) -> T
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    let Some(core) = context::current() else {
        return f();
    };
    let slot = new_slot();
    let job_slot = slot.clone();
    // `f` and everything it borrows are consumed inside `complete` before
    // the outcome is stored; after that the job touches only the Arc'd slot.
    let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || complete(&job_slot, f));
    // The job borrows what `f` borrows. This function returns only after
    // the job stored its outcome, which happens after `f` (and its captures)
    // are gone, and the wait below cannot unwind (`park_raw` ignores
    // cancellation and timeouts), so every borrow outlives its use.
    // SAFETY: as argued above; only the lifetime is erased, not the layout.
    let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
    submit(job);
    wait(&slot, || {
        core.park_raw(None, WaitOn::Blocking);
    })
}
