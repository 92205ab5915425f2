//! The public face of a runtime of several workers, `Runtime<Workers>`,
//! and its worker threads, each a scheduler that runs until the runtime is
//! dropped. The inboxes and the rules of stealing are in `pool.rs`; a
//! worker's side of them, in `core/worker.rs`.

use std::sync::Arc;
use std::thread;

use crate::fiber::JoinHandle;
use crate::runtime::Runtime;
use crate::runtime::dump::{self, Dump};
use crate::scheduler::context::{self, Enter, close};
use crate::scheduler::core::job::Job;
use crate::scheduler::core::{Core, Tuning, Until};
use crate::scheduler::metrics::WorkerMetrics;
use crate::scheduler::pool::{Pool, WorkerLink};

/// The worker threads of a [`Runtime`] built with
/// [`workers`](crate::runtime::Builder::workers): the runtime's flavor, as
/// in `Runtime<Workers>`.
pub struct Workers {
    pool: Arc<Pool<Job>>,
    threads: Vec<thread::JoinHandle<()>>,
}

/// Memory mappings a worker thread costs: its stack and guard page, and
/// std's signal stack and guard page (4.3 measured on Linux 6.18, glibc),
/// with a margin.
const MAPS_PER_WORKER: u64 = 8;

/// Mappings left over for the rest of the process: fiber stacks, the
/// allocator, libraries.
const MAPS_RESERVE: u64 = 1024;

impl Workers {
    pub(crate) fn start(n: usize, stack_size: usize, tuning: Tuning) -> std::io::Result<Workers> {
        check_mappings(n)?;
        start_pool(n, stack_size, tuning)
    }
}

/// Starts `n` workers and waits until each has its scheduler.
///
/// One at a time: a worker is started only once the one before has
/// reported, so the first that fails (no thread, or no fds for its
/// reactor) ends the start with its error, and the workers already up
/// are stopped and joined. (Starting them all before reading any
/// report ran on past the limits until std could not map a thread's
/// signal stack, and aborted the process.)
fn start_pool(n: usize, stack_size: usize, tuning: Tuning) -> std::io::Result<Workers> {
    let pool = Arc::new(Pool::new(n));
    let mut threads = Vec::with_capacity(n);
    let mut failure = None;
    for index in 0..n {
        let link = WorkerLink::new(pool.clone(), index);
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
                failure = Some(std::io::Error::other(format!(
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
    Ok(Workers { pool, threads })
}

/// A worker thread: its scheduler runs until the runtime is dropped, then
/// cancels its fibers and drops the jobs nobody started.
fn worker_main(
    link: WorkerLink<Job>,
    stack_size: usize,
    tuning: Tuning,
    report: std::sync::mpsc::Sender<std::io::Result<()>>,
) {
    let index = link.index();
    let own = link.clone();
    let core = match Core::new(stack_size, tuning, Some(link)) {
        Ok(core) => core,
        Err(e) => {
            let _ = report.send(Err(e));
            return;
        }
    };
    crate::observe::install();
    // Listed for debuggers; it stays in this frame until `close` unlists it.
    crate::observe::debugger::register(&core);
    own.started(core.shared.clone());
    let _ = report.send(Ok(()));
    drop(report);

    let span = tracing::debug_span!("fibra-worker", worker = index);
    let _span = span.enter();
    let enter = Enter::nested(&core);
    own.run(); // up: no longer WAKING
    core.run_root(Until::Stopped);
    drop(enter);
    // Off gdb's list first: a close that panics leaves no stale entry.
    crate::observe::debugger::unregister(&core);
    close(&core);
    // Jobs still queued here are dropped unrun: their handles report them
    // cancelled.
    own.drop_unstarted();
}

/// Refuses, up front, more workers than the process has memory mappings
/// left for (`vm.max_map_count`, 65530 by default): past it std cannot map
/// a new thread's signal stack and aborts the process, where every other
/// shortage (threads, fds, memory) is an error `start_pool` returns.
fn check_mappings(n: usize) -> std::io::Result<()> {
    let Some(max) = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    else {
        return Ok(()); // no procfs: nothing to go by
    };
    let needed = (n as u64).saturating_mul(MAPS_PER_WORKER);
    let used = std::fs::read("/proc/self/maps")
        .map(|maps| maps.iter().filter(|&&b| b == b'\n').count() as u64)
        .unwrap_or(0);
    if needed.saturating_add(used).saturating_add(MAPS_RESERVE) <= max {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::OutOfMemory,
        format!(
            "cannot start {n} fibra workers: each needs about {MAPS_PER_WORKER} memory \
             mappings, and this process uses {used} of vm.max_map_count = {max}"
        ),
    ))
}

impl Drop for Workers {
    /// Stops the workers: each cancels its fibers, unwinding them so their
    /// destructors run, and exits; waits for all of them.
    fn drop(&mut self) {
        self.pool.stop();
        let me = thread::current().id();
        for thread in self.threads.drain(..) {
            if thread.thread().id() == me {
                // Dropped by one of its own fibers: that worker stops when
                // the fiber returns to it; waiting for it here would hang.
                continue;
            }
            if thread.join().is_err() {
                let message = "a fibra worker thread panicked";
                crate::report::tell(crate::report::Level::Error, "fibra", message, None, || {
                    tracing::error!("{message}");
                });
            }
        }
    }
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("workers", &self.pool.workers())
            .finish()
    }
}

impl Runtime<Workers> {
    fn pool(&self) -> &Pool<Job> {
        &self.flavor.pool
    }

    /// Runs `f` as a fiber on one of the workers and waits for it, blocking
    /// the calling thread; returns what `f` returns, or re-raises its panic.
    ///
    /// `f` may borrow from the caller (the call does not return before the
    /// fiber is gone), and must be `Send`, since it runs on another thread.
    /// Fibers `f` spawns with [`fibra::spawn`](crate::spawn) run on the same
    /// worker; those still alive when it returns go on running.
    ///
    /// # Panics
    ///
    /// When called from a fiber or inside another runtime's `block_on`: it
    /// would block that runtime's thread. Spawn the work and join it there.
    ///
    /// ```
    /// let rt = fibra::Runtime::builder().workers(2).build()?;
    /// let words = vec!["a", "b"];
    /// let n = rt.block_on(|| {
    ///     let h = fibra::spawn(|| 40);
    ///     h.join().unwrap() + words.len()
    /// });
    /// assert_eq!(n, 42);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn block_on<F, T>(&self, f: F) -> T
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        if context::in_runtime() {
            panic!(
                "`Runtime::block_on` cannot be called from a fiber or from inside \
                 `block_on`: it would block the runtime running there. Spawn the \
                 work on this runtime and join it instead."
            );
        }
        // the borrows of `f` and `T` must outlive the job. Once
        // `submit` has the job, this call returns or unwinds only after
        // `join` has seen the result, which comes after the fiber dropped
        // `f` (or after the job was dropped unrun). `join` on a thread does
        // not unwind (a thread's park does not). `submit` runs no user code
        // (a failed wake-up of a worker is reported by that worker, later),
        // but should it ever unwind after queueing the job, `JoinOnUnwind`
        // still waits for the job before the borrows end.
        // SAFETY: as argued just above.
        let (job, handle) = unsafe { Job::new_unchecked(f) };
        let mut waiting = JoinOnUnwind(Some(handle));
        self.pool().submit(job, None);
        let handle = waiting.0.take().expect("set above");
        match handle.join() {
            Ok(value) => value,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("`Runtime::block_on`: {e} (the runtime was shutting down)"),
        }
    }

    /// Spawns a fiber on one of the workers: an idle one if there is one,
    /// the next in turn otherwise. Until it starts, an idle worker may take
    /// it over; once started it stays on its worker.
    ///
    /// ```
    /// let rt = fibra::Runtime::builder().workers(2).build()?;
    /// let handles: Vec<_> = (0..4).map(|i| rt.spawn(move || i * 2)).collect();
    /// let sum: i32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    /// assert_eq!(sum, 12);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (job, handle) = Job::new(f);
        self.pool().submit(job, None);
        handle
    }

    /// Spawns a fiber on worker `worker` (`0..workers()`), where it stays:
    /// for work that must run on every worker, like a listener per worker
    /// with [`TcpListener::bind_reuse_port`](crate::net::TcpListener::bind_reuse_port).
    ///
    /// # Panics
    ///
    /// When `worker` is not below [`workers`](Runtime::workers).
    ///
    /// ```
    /// let rt = fibra::Runtime::builder().workers(2).build()?;
    /// let names: Vec<_> = (0..rt.workers())
    ///     .map(|w| rt.spawn_on(w, || std::thread::current().name().unwrap().to_owned()))
    ///     .map(|h| h.join().unwrap())
    ///     .collect();
    /// assert_eq!(names, ["fibra-worker-0", "fibra-worker-1"]);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn spawn_on<F, T>(&self, worker: usize, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let workers = self.workers();
        assert!(
            worker < workers,
            "Runtime::spawn_on: worker {worker} does not exist (this runtime has {workers})"
        );
        let (job, handle) = Job::new(f);
        self.pool().submit(job, Some(worker));
        handle
    }

    /// A [`Handle`](crate::runtime::Handle) to this runtime, as
    /// [`Handle::current`](crate::runtime::Handle::current) gives it inside.
    ///
    /// ```
    /// let rt = fibra::Runtime::builder().workers(2).build()?;
    /// let handle = rt.handle();
    /// let h = std::thread::spawn(move || handle.spawn(|| 1 + 1)).join().unwrap();
    /// assert_eq!(h.join().unwrap(), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn handle(&self) -> crate::runtime::Handle {
        crate::runtime::Handle::of_pool(self.flavor.pool.clone())
    }

    /// How many workers this runtime has.
    ///
    /// ```
    /// let rt = fibra::Runtime::builder().workers(3).build()?;
    /// assert_eq!(rt.workers(), 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn workers(&self) -> usize {
        self.pool().workers()
    }

    /// Each worker's figures, as last published; see [`WorkerMetrics`].
    ///
    /// ```
    /// let rt = fibra::Runtime::builder().workers(2).build()?;
    /// assert!(rt.metrics().iter().all(|m| m.alive == 0));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn metrics(&self) -> Vec<WorkerMetrics> {
        self.pool().metrics()
    }

    /// Every fiber of every worker, with its id, name, state and what it
    /// waits for: see [`Dump`]. Each worker answers at its next poll; one
    /// that does not within a second (a fiber computing without blocking)
    /// is listed as such. Works from any thread and from a fiber.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = fibra::Runtime::builder().workers(2).build()?;
    /// for w in 0..2 {
    ///     rt.spawn_on(w, || fibra::sleep(Duration::from_secs(60)));
    /// }
    /// while rt.metrics().iter().map(|m| m.parked).sum::<usize>() < 2 {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// let dump = rt.dump();
    /// assert!(dump.is_complete());
    /// assert_eq!(dump.fibers().count(), 2);
    /// println!("{dump}"); // thread "fibra-worker-0": 1 fibers ...
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn dump(&self) -> Dump {
        dump::collect(self.pool().runtimes(), |shared| match context::current() {
            // Asked from a fiber of one of the workers: it answers itself.
            Some(core) if Arc::ptr_eq(&core.shared, shared) => Some(core.dump_section(true)),
            _ => None,
        })
    }

    /// How many fibers of this runtime have not finished, started or not
    /// (from the figures the workers last published).
    ///
    /// ```
    /// let rt = fibra::Runtime::builder().workers(2).build()?;
    /// assert_eq!(rt.fibers(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn fibers(&self) -> usize {
        self.metrics().iter().map(|m| m.alive + m.queued).sum()
    }
}

/// Joins a `block_on` fiber if the caller unwinds before its own join (see
/// the SAFETY argument there).
struct JoinOnUnwind<T>(Option<JoinHandle<T>>);

impl<T> Drop for JoinOnUnwind<T> {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            let _ = handle.join();
        }
    }
}

impl std::fmt::Debug for Runtime<Workers> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("workers", &self.workers())
            .field("fibers", &self.fibers())
            .finish()
    }
}
