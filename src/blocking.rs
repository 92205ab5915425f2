//! [`spawn_blocking`]: run blocking work (files, DNS, heavy computation) on
//! a pool of threads while the fiber parks.
//!
//! The pool is one per process, shared by every runtime. It grows a thread
//! at a time when work arrives and no thread is idle, up to
//! [`max_blocking_threads`] (512 unless [`set_max_blocking_threads`] says
//! otherwise), and a thread that stays idle for [`KEEP_ALIVE`] exits, so an
//! idle process keeps no threads around.
//!
//! # Who creates the threads
//!
//! Creating a thread costs tens of microseconds (`clone`, a stack mapping,
//! TLS set-up), and a fan-out of 2 000 calls used to pay that 512 times on
//! the runtime's own thread, where it stalled every fiber for 30 ms. So the
//! thread that submits work never creates pool threads: it counts the
//! thread it wants and wakes the *spawner*, a thread of the pool's own
//! (`fibra-blocking-spawner`) that creates them one after another. Only the
//! spawner itself is created by a submitter, once when the pool starts
//! from nothing (at the first call, or after a quiet [`KEEP_ALIVE`]): one
//! thread creation, not hundreds.
//!
//! # Ground rules
//!
//! All pool state is in [`State`], behind one lock, taken only briefly and
//! never while a job runs or a thread is being created.
//! `threads` counts the workers alive *and* those asked of the spawner, so
//! the cap holds for both.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::scheduler::context;
#[cfg(feature = "hook")]
use crate::scheduler::park::{Halted, park_without_unwind};
use crate::scheduler::park::{Unparker, park_uncancellable};
use crate::scheduler::wait_on::WaitOn;
#[cfg(feature = "hook")]
use crate::timer::clock;

/// The cap on pool threads unless [`set_max_blocking_threads`] changes it:
/// tokio's default too.
pub const DEFAULT_MAX_THREADS: usize = 512;

/// How long an idle pool thread waits for work before it exits.
pub const KEEP_ALIVE: Duration = Duration::from_secs(10);

static MAX_THREADS: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_THREADS);

/// Sets how many threads the blocking pool (behind [`spawn_blocking`] and
/// [`fibra::fs`](crate::fs)) may run at once; work beyond that waits in a
/// queue, first come first served, until a thread is free. The default is
/// 512, as in tokio (where it is `runtime::Builder::max_blocking_threads`).
///
/// The pool is shared by every runtime of the process, so this is a
/// process-wide setting, not a runtime builder's: call it early, in
/// `main`. It takes effect at once for new threads; lowering it below the
/// number running lets the surplus finish their work and exit when idle.
///
/// Raise it when many calls block for long at once (a fan-out of slow
/// `spawn_blocking` calls, files on a slow network mount): each blocked call
/// holds a thread. Every thread reserves its stack (2 MiB of address space,
/// committed as used) and counts against `ulimit -u`.
///
/// # Panics
///
/// If `n` is 0: the work would never run.
///
/// ```
/// fibra::set_max_blocking_threads(1024);
/// assert_eq!(fibra::max_blocking_threads(), 1024);
/// # fibra::set_max_blocking_threads(512);
/// ```
#[track_caller]
pub fn set_max_blocking_threads(n: usize) {
    assert!(
        n > 0,
        "set_max_blocking_threads(0): the pool needs a thread"
    );
    MAX_THREADS.store(n, Ordering::Relaxed);
}

/// How many threads the blocking pool may run at once: 512 unless
/// [`set_max_blocking_threads`] changed it.
///
/// ```
/// assert!(fibra::max_blocking_threads() >= 1);
/// ```
pub fn max_blocking_threads() -> usize {
    MAX_THREADS.load(Ordering::Relaxed)
}

type Job = Box<dyn FnOnce() + Send>;

struct Pool {
    state: Mutex<State>,
    /// Idle workers wait here for a job.
    work: Condvar,
    /// The spawner waits here for threads to create.
    grow: Condvar,
}

struct State {
    queue: VecDeque<Job>,
    /// Workers alive plus those asked of the spawner (`to_spawn`).
    threads: usize,
    /// Workers waiting on `work`.
    idle: usize,
    /// Wake-ups sent on `work` and not yet taken by a worker: an idle
    /// worker that has been told of a job is not idle for the next one.
    notified: usize,
    /// Threads the spawner is to create.
    to_spawn: usize,
    /// Whether the spawner thread is alive.
    spawner: bool,
    /// The fork generation of the process whose threads these are (see
    /// `scheduler::fork`): a forked child has none of them.
    generation: u32,
}

impl State {
    /// A pool with no thread, in the process of fork generation
    /// `generation`.
    const fn new(generation: u32) -> State {
        State {
            queue: VecDeque::new(),
            threads: 0,
            idle: 0,
            notified: 0,
            to_spawn: 0,
            spawner: false,
            generation,
        }
    }
}

static POOL: Pool = Pool {
    state: Mutex::new(State::new(0)),
    work: Condvar::new(),
    grow: Condvar::new(),
};

fn lock() -> std::sync::MutexGuard<'static, State> {
    let mut state = POOL.state.lock().unwrap_or_else(|e| e.into_inner());
    let generation = crate::scheduler::fork::generation();
    if state.generation != generation {
        // A forked child: the parent's threads are not here, nor is anyone
        // waiting for the parent's jobs.
        let jobs = std::mem::replace(&mut *state, State::new(generation)).queue;
        std::mem::forget(jobs); // (the parent's: not ours to run or drop)
    }
    state
}

/// Queues a job and makes sure a thread will take it: an idle one, or a
/// new one asked of the spawner. Creates no thread itself, save the
/// spawner when the pool starts from nothing.
fn submit(job: Job) {
    let mut state = lock();
    state.queue.push_back(job);
    if state.idle > state.notified {
        state.notified += 1;
        POOL.work.notify_one();
        return;
    }
    if state.threads >= max_blocking_threads() {
        return; // a busy thread takes it when it is done
    }
    state.threads += 1;
    state.to_spawn += 1;
    if state.spawner {
        if state.to_spawn == 1 {
            // The spawner waits only when it has nothing to create (it
            // checks under this lock), so only the first request wakes it:
            // one syscall, not one per job of a fan-out.
            POOL.grow.notify_one();
        }
        return;
    }
    state.spawner = true;
    drop(state);
    // The pool's threads are made by the spawner, and inherit its mask.
    let spawned = crate::scheduler::helper::spawn_quiet(|| {
        std::thread::Builder::new()
            .name("fibra-blocking-spawner".into())
            .spawn(spawner)
    });
    if let Err(e) = spawned {
        let mut state = lock();
        state.spawner = false;
        state.threads -= state.to_spawn;
        state.to_spawn = 0;
        if state.threads == 0 {
            // No thread can run the queue: run it here rather than never.
            let message = format!("no blocking-pool thread ({e}): running blocking work inline");
            crate::report::tell(crate::report::Level::Warn, "fibra", &message, None, || {
                tracing::warn!(error = %e, "no blocking-pool thread: running blocking work inline");
            });
            let jobs: Vec<Job> = state.queue.drain(..).collect();
            drop(state);
            jobs.into_iter().for_each(|job| job());
        }
    }
}

/// The spawner: creates the threads that `submit` asks for, so that no
/// submitter (a runtime's thread) pays for it. Exits when the pool has no
/// thread left and nothing was asked of it for [`KEEP_ALIVE`].
fn spawner() {
    let mut state = lock();
    loop {
        if state.to_spawn > 0 {
            state.to_spawn -= 1;
            drop(state);
            let spawned = std::thread::Builder::new()
                .name("fibra-blocking".into())
                .spawn(worker);
            state = lock();
            if let Err(e) = spawned {
                // Give up the threads still asked for; later work asks again.
                state.threads -= 1 + state.to_spawn;
                state.to_spawn = 0;
                if state.threads == 0 && !state.queue.is_empty() {
                    // No worker at all: this thread runs the queue rather
                    // than let it wait forever (never a runtime's thread).
                    let message =
                        format!("no blocking-pool thread ({e}): the spawner runs the work");
                    crate::report::tell(
                        crate::report::Level::Warn,
                        "fibra",
                        &message,
                        None,
                        || {
                            tracing::warn!(error = %e, "no blocking-pool thread: the spawner runs the work");
                        },
                    );
                    while let Some(job) = state.queue.pop_front() {
                        drop(state);
                        job();
                        state = lock();
                    }
                }
            }
            continue;
        }
        let (next, timeout) = POOL
            .grow
            .wait_timeout(state, KEEP_ALIVE)
            .unwrap_or_else(|e| e.into_inner());
        state = next;
        if timeout.timed_out() && state.to_spawn == 0 && state.threads == 0 {
            state.spawner = false;
            return;
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
        if state.notified > 0 {
            // Told of a job (this one or, after a spurious wake-up, another
            // idle worker's: either way one wake-up, one job taken).
            state.notified -= 1;
            continue;
        }
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
                crate::scheduler::park::retire_token();
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
/// The pool is shared by the whole process. It starts threads as work
/// arrives and none is idle, up to [`max_blocking_threads`] (512 by
/// default; change it with [`set_max_blocking_threads`]); beyond that, calls
/// wait in a queue, first come first served, until a thread is free. Idle
/// threads exit after 10 s. New threads are created by a thread of the
/// pool's own, never by the calling fiber's thread, so a fan-out of
/// thousands of calls does not stall the fibers around it.
///
/// For files, [`fibra::fs`](crate::fs) does this for you, call by call.
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
        crate::scheduler::park::park_current(None, WaitOn::Blocking);
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
    let slot = submit_borrowing(f);
    wait(&slot, || park_uncancellable(core, None, WaitOn::Blocking))
}

/// [`run_borrowing`] for a call that a cancellation or an expired
/// `fibra::timeout` of the waiting fiber should cut short (a hooked
/// `connect`): when one lands while `f` runs, `interrupt` is called — and
/// again every [`INTERRUPT_EVERY`] until `f` returns, in case `f` had not
/// started its wait yet — to make `f` return early. The wait never
/// unwinds (the caller may be a C function); it returns `f`'s result and
/// what halted the wait, if anything did.
#[cfg(feature = "hook")]
pub(crate) fn run_interruptible<F, T>(f: F, mut interrupt: impl FnMut()) -> (T, Option<Halted>)
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    let Some(core) = context::current() else {
        return (f(), None);
    };
    let slot = submit_borrowing(f);
    let mut halted = None;
    let value = wait(&slot, || match halted {
        None => match park_without_unwind(core, None, WaitOn::Blocking) {
            h @ (Halted::Cancelled | Halted::Expired) => {
                halted = Some(h);
                interrupt();
            }
            Halted::Woken | Halted::TimedOut => {}
        },
        Some(_) => {
            let again = clock::now_ns().saturating_add(INTERRUPT_EVERY.as_nanos() as u64);
            park_uncancellable(core, Some(again), WaitOn::Blocking);
            interrupt();
        }
    });
    (value, halted)
}

/// How often [`run_interruptible`] interrupts its job again.
#[cfg(feature = "hook")]
const INTERRUPT_EVERY: Duration = Duration::from_millis(10);

/// Queues `f`, which may borrow from the caller, and returns its slot. The
/// caller must wait for the slot's outcome before any borrow of `f` ends,
/// with a wait that cannot unwind.
fn submit_borrowing<F, T>(f: F) -> Slot<T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    let slot = new_slot();
    let job_slot = slot.clone();
    // `f` and everything it borrows are consumed inside `complete` before
    // the outcome is stored; after that the job touches only the Arc'd slot.
    let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || complete(&job_slot, f));
    // The job borrows what `f` borrows. Both callers return only after the
    // job stored its outcome, which happens after `f` (and its captures)
    // are gone, and their waits cannot unwind (`park_uncancellable` and
    // `park_without_unwind` neither unwind nor return for good on a
    // cancellation or a timeout), so every borrow outlives its use.
    // SAFETY: as argued above; only the lifetime is erased, not the layout.
    let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
    submit(job);
    slot
}
