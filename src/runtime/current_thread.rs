//! The runtime on the thread that drives it: `Runtime<CurrentThread>`'s
//! `block_on`, `run` and `turn`, spawning from outside, its figures, and
//! its end (every fiber left is cancelled and finished).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

use crate::fiber::{self, JoinHandle};
use crate::observe::dump_names;
use crate::runtime::{Builder, Dump, Runtime, WorkerMetrics};
use crate::scheduler::context::{self, Enter, close};
use crate::scheduler::core::{Core, Until};
use crate::scheduler::thread_exit;

/// A runtime on the thread that drives it: the default flavor of [`Runtime`].
///
/// It stays on the thread that made it: neither `Send` nor `Sync`, so a
/// `Runtime` moved or shared into another thread does not compile, with
/// one error that says so in its first line ("`*const Runtime` cannot be
/// sent between threads safely", or "shared"):
///
/// ```compile_fail,E0277
/// let rt = fibra::Runtime::new().unwrap();
/// std::thread::spawn(move || rt.run()); // `*const Runtime` cannot be sent between threads
/// ```
///
/// ```compile_fail,E0277
/// let rt = fibra::Runtime::new().unwrap();
/// std::thread::scope(|s| {
///     s.spawn(|| rt.turn(None)); // `*const Runtime` cannot be shared between threads
/// });
/// ```
///
/// Another thread reaches the runtime through what is made to cross
/// threads: a fibra channel, an [`EventFd`](crate::io::EventFd), a
/// `JoinHandle`.
pub struct CurrentThread {
    /// What keeps the runtime on its thread, and what the compiler's error
    /// names when it is moved or shared: a pointer to a `Runtime`.
    _on_its_thread: std::marker::PhantomData<*const Runtime>,
    core: OwnCore,
}

/// The runtime's scheduler, which holds raw pointers and cells that are
/// neither `Send` nor `Sync`, as fibra's internal types: left to
/// themselves they made an error of 8 messages over 460 lines that named
/// them, and not `Runtime`, when a runtime crossed threads.
struct OwnCore(Box<Core>);

// SAFETY: never true of an `OwnCore` alone: it lives only in a
// `CurrentThread`, whose marker field (a raw pointer) makes it neither
// `Send` nor `Sync`, so the `Core` never leaves, nor is shared beyond, the
// thread that made it. These impls only keep the compiler's error to that
// marker (see above).
unsafe impl Send for OwnCore {}
// SAFETY: as above.
unsafe impl Sync for OwnCore {}

impl CurrentThread {
    pub(crate) fn new(core: Core) -> CurrentThread {
        let core = Box::new(core);
        // Listed for debuggers at its final address (`close` unlists it),
        // and as this thread's (see `scheduler::owner`).
        crate::observe::debugger::register(&core);
        crate::scheduler::owner::own(&core);
        CurrentThread {
            _on_its_thread: std::marker::PhantomData,
            core: OwnCore(core),
        }
    }
}

impl Runtime {
    /// A runtime with the default configuration.
    ///
    /// # Errors
    ///
    /// When the kernel refuses the epoll fd, eventfd or timerfd (for example
    /// at the open-file limit).
    ///
    /// ```
    /// let rt = fibra::Runtime::new()?;
    /// assert_eq!(rt.block_on(|| 1 + 1), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// A [`Builder`] to configure a runtime.
    ///
    /// ```
    /// let rt = fibra::Runtime::builder().stack_size(64 * 1024).build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }

    fn core(&self) -> &Core {
        &self.flavor.core.0
    }

    /// Runs `f` on this thread as the runtime's root, running the runtime's
    /// fibers whenever `f` blocks, and returns what `f` returns.
    ///
    /// `f` may borrow from the caller. Fibers still alive when `f` returns
    /// stay in the runtime (they run in its next `block_on`, `run` or `turn`,
    /// or are cancelled when it is dropped). If `f` panics, the panic is
    /// re-raised here and the runtime stays usable.
    ///
    /// # Panics
    ///
    /// When called from a fiber or from inside another `block_on`: that
    /// would stop the runtime already running on this thread.
    ///
    /// ```
    /// let rt = fibra::Runtime::new()?;
    /// let mut log = Vec::new();
    /// rt.block_on(|| {
    ///     let h = fibra::spawn(|| "from a fiber");
    ///     log.push(h.join().unwrap());
    /// });
    /// assert_eq!(log, ["from a fiber"]);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn block_on<T>(&self, f: impl FnOnce() -> T) -> T {
        self.refuse_at_thread_exit("Runtime::block_on");
        let enter = Enter::new(self.core(), "Runtime::block_on");
        let result = panic::catch_unwind(AssertUnwindSafe(f));
        // Fibers it spawned or woke and left ready make the fd readable.
        self.core().prepare_outer_wait();
        drop(enter);
        self.left();
        match result {
            Ok(value) => value,
            Err(payload) => panic::resume_unwind(payload),
        }
    }

    /// Runs fibers until none is left (fibers parked forever keep it
    /// running, like threads keep a process alive).
    ///
    /// # Panics
    ///
    /// When called from a fiber or from inside `block_on`.
    ///
    /// ```
    /// let rt = fibra::Runtime::new()?;
    /// for i in 0..3 {
    ///     rt.spawn(move || fibra::sleep(std::time::Duration::from_millis(i)));
    /// }
    /// rt.run();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn run(&self) {
        self.refuse_at_thread_exit("Runtime::run");
        let enter = Enter::new(self.core(), "Runtime::run");
        self.core().run_root(Until::NoFibers);
        self.core().prepare_outer_wait();
        drop(enter);
        self.left();
    }

    /// One step for an outer loop: runs the fibers that are ready; if none
    /// was, runs each [idle](crate::Builder::idle) fiber that is ready once
    /// (its slice up to its next yield or park, polling for I/O and timers
    /// before each, and stopping when a normal fiber becomes ready); if
    /// there was none either, waits at most `timeout` (`None`: until
    /// something happens) for I/O, a timer or a wake-up from another thread
    /// and runs the fibers it readied. Returns how many times it resumed a
    /// fiber.
    ///
    /// Between turns the runtime's fd ([`AsRawFd`]) is readable exactly when
    /// the runtime has work, so an outer `poll`/`epoll` can wait on it. Idle
    /// fibers alone are not work: they run in the turns the outer loop makes
    /// anyway (a game loop's frames), not in a loop that would spin on them.
    ///
    /// # Panics
    ///
    /// When called from a fiber or from inside `block_on`.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = fibra::Runtime::new()?;
    /// rt.spawn(|| fibra::sleep(Duration::from_millis(2)));
    /// let mut resumed = 0;
    /// while rt.fibers() > 0 {
    ///     // ... the rest of a frame of a game or GUI loop ...
    ///     resumed += rt.turn(Some(Duration::from_millis(16)));
    /// }
    /// assert_eq!(resumed, 2); // its start, and its wake-up
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// An [idle](crate::Builder::idle) fiber gets a slice in each turn that
    /// finds nothing else to run:
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::time::Duration;
    ///
    /// let rt = fibra::Runtime::new()?;
    /// let slices = Arc::new(AtomicU32::new(0));
    /// let s = slices.clone();
    /// rt.spawn(move || {
    ///     let background = move || loop {
    ///         s.fetch_add(1, Ordering::Relaxed); // a slice of background work
    ///         fibra::yield_now();
    ///     };
    ///     fibra::Builder::new().idle(true).spawn(background).unwrap();
    /// });
    /// rt.turn(Some(Duration::ZERO)); // the spawner runs
    /// assert_eq!(slices.load(Ordering::Relaxed), 0);
    /// rt.turn(Some(Duration::ZERO)); // nothing else is ready: a slice
    /// rt.turn(None); // the same, without waiting
    /// assert_eq!(slices.load(Ordering::Relaxed), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn turn(&self, timeout: Option<Duration>) -> usize {
        self.turn_until(timeout, None, "Runtime::turn")
    }

    /// [`turn`](Runtime::turn) with a time budget, for a loop that owes
    /// its frames a fixed period (a game at 60 Hz): it stops resuming
    /// fibers once `budget` has passed since it began, checked between
    /// fibers (a fiber is never interrupted: one that runs long overruns
    /// the budget by its own time). The first ready fiber is resumed
    /// whatever the clock says, so that a loop whose turns all come late
    /// (a budget spent by the poll, a preempted thread) still moves its
    /// fibers on. The fibers it left stay ready, first in line for the next
    /// turn, and the runtime's fd stays readable. Returns how many times it
    /// resumed a fiber.
    ///
    /// What bounds a plain `turn`: it resumes each fiber ready when it
    /// starts once (a fiber that yields goes behind them, to the next
    /// turn), plus the fibers that the I/O events and timers of its one
    /// poll (up to 1 024 events) made ready. I/O and timers are polled
    /// at the start of every turn, budgeted or not, so a budget never
    /// starves them.
    ///
    /// # Panics
    ///
    /// When called from a fiber or from inside `block_on`.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let rt = fibra::Runtime::new()?;
    /// for _ in 0..100 {
    ///     rt.spawn(|| {
    ///         let start = Instant::now();
    ///         while start.elapsed() < Duration::from_millis(1) {} // 1 ms of work
    ///     });
    /// }
    /// // A frame has 5 ms left for fibers: a few run, the rest wait.
    /// let ran = rt.turn_with_budget(Some(Duration::ZERO), Duration::from_millis(5));
    /// assert!((1..100).contains(&ran), "{ran}");
    /// while rt.fibers() > 0 {
    ///     rt.turn_with_budget(Some(Duration::ZERO), Duration::from_millis(5));
    /// }
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn turn_with_budget(&self, timeout: Option<Duration>, budget: Duration) -> usize {
        let budget_ns = u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX);
        let deadline = crate::timer::clock::now_ns().saturating_add(budget_ns.max(1));
        self.turn_until(timeout, Some(deadline), "Runtime::turn_with_budget")
    }

    /// A turn; `deadline`: no fiber resumed once the clock reads it (ns).
    #[track_caller]
    fn turn_until(&self, timeout: Option<Duration>, deadline: Option<u64>, what: &str) -> usize {
        self.refuse_at_thread_exit(what);
        let enter = Enter::new(self.core(), what);
        let core = self.core();
        // SAFETY: on the runtime's thread (Runtime is !Send); short borrow.
        let before = unsafe { core.local() }.resumed;
        core.poll(Some(Duration::ZERO));
        core.run_batch(deadline);
        // SAFETY: as above.
        if unsafe { core.local() }.resumed == before
            && !core.has_ready()
            && core.run_idle_once() == 0
        {
            // Wait until a fiber is ready or the time is up. One poll may
            // not do: the timerfd also fires when the wheel cascades. (The
            // polls of `run_idle_once` may have readied a fiber already:
            // then there is nothing to wait for.)
            let wait_until = timeout.map(crate::timer::clock::after_ns);
            while !core.has_ready() {
                let left = wait_until
                    .map(|d| Duration::from_nanos(d.saturating_sub(crate::timer::clock::now_ns())));
                core.poll(left);
                if left.is_some_and(|l| l.is_zero()) {
                    break;
                }
            }
            // (A budget counts from the turn's start: the wait is in it.)
            core.run_batch(deadline);
        }
        core.prepare_outer_wait();
        // SAFETY: as above.
        let resumed = (unsafe { core.local() }.resumed - before) as usize;
        drop(enter);
        self.left();
        resumed
    }

    /// Called after the runtime was driven: if fibers are left, they may
    /// hold borrows of thread-locals from now on (see `thread_exit`).
    fn left(&self) {
        if self.fibers() > 0 {
            thread_exit::arm();
        }
    }

    /// Panics if the thread is destroying its thread-locals and this
    /// runtime has fibers: running them could resume one that borrows a
    /// destroyed thread-local (see `thread_exit`).
    #[track_caller]
    fn refuse_at_thread_exit(&self, what: &str) {
        if self.fibers() > 0 && thread_exit::destroying() {
            panic!(
                "`{what}` called while the thread destroys its thread-locals, on a \
                 runtime with fibers: they may borrow thread-locals already gone, so \
                 fibra will not resume them"
            );
        }
    }

    /// Spawns a fiber on this runtime from outside it (from the thread that
    /// owns it, before or between `block_on`, `run` and `turn`, or from one
    /// of its fibers). The fiber starts when the runtime next runs; from
    /// outside, the runtime's fd is readable from now on (an outer loop
    /// that waits on it calls [`turn`](Runtime::turn) next).
    ///
    /// `f` need not be `Send`: this runtime is its thread's alone (it is
    /// not `Send` itself), so the fiber runs where it was spawned, as with
    /// [`fibra::spawn`](crate::spawn). A runtime of several workers, whose
    /// fibers may start on another thread, asks for `Send`.
    ///
    /// # Panics
    ///
    /// When the fiber's stack cannot be mapped; use
    /// [`fibra::Builder`](crate::Builder) to handle that error.
    ///
    /// ```
    /// use std::rc::Rc;
    ///
    /// let rt = fibra::Runtime::new()?;
    /// let shared = Rc::new("not Send");
    /// let s = shared.clone();
    /// let h = rt.spawn(move || s.len());
    /// assert_eq!(rt.block_on(|| h.join().unwrap()), 8);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let core = self.core();
        let stack = core.default_stack;
        let handle = match fiber::spawn_on(core, f, None, stack, false) {
            Ok(handle) => handle,
            Err(e) => panic!("fibra: cannot spawn a fiber: {e}"),
        };
        // From outside, the first fiber made ready makes the fd readable
        // (the ones after find it so: only a turn drains it).
        if !core.is_entered() && core.ready_count() == 1 {
            core.prepare_outer_wait();
        }
        handle
    }

    /// How many fibers this runtime has that have not finished.
    ///
    /// ```
    /// let rt = fibra::Runtime::new()?;
    /// rt.spawn(|| ());
    /// assert_eq!(rt.fibers(), 1);
    /// rt.run();
    /// assert_eq!(rt.fibers(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn fibers(&self) -> usize {
        // SAFETY: on the runtime's thread (Runtime is !Send); short borrow.
        unsafe { self.core().local() }.live
    }
}

impl Runtime {
    /// This runtime's figures: one [`WorkerMetrics`] (its worker is 0).
    ///
    /// ```
    /// let rt = fibra::Runtime::new()?;
    /// rt.spawn(|| ());
    /// let m = &rt.metrics()[0];
    /// assert_eq!((m.alive, m.ready, m.parked), (1, 1, 0));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn metrics(&self) -> Vec<WorkerMetrics> {
        let (alive, ready) = self.core().figures();
        vec![WorkerMetrics::current_thread(alive, ready)]
    }

    /// Every fiber of this runtime with its id, name, state and what it
    /// waits for: see [`Dump`]. Call it from the runtime's thread, or
    /// from a fiber.
    ///
    /// ```
    /// let rt = fibra::Runtime::new()?;
    /// rt.block_on(|| {
    ///     let (tx, rx) = fibra::sync::mpsc::channel::<()>();
    ///     let h = fibra::Builder::new()
    ///         .name("waiter".into())
    ///         .spawn(move || rx.recv())
    ///         .unwrap();
    ///     fibra::yield_now(); // it parks on the channel
    ///     let dump = rt.dump().to_string();
    ///     assert!(dump.contains(r#""waiter" [parked: channel receive]"#), "{dump}");
    ///     drop(tx);
    ///     h.join().unwrap().unwrap_err();
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn dump(&self) -> Dump {
        dump_names::resolve(vec![self.core().dump_section(true)], context::in_fiber())
    }

    /// A [`Handle`](crate::runtime::Handle) to this runtime, which other
    /// threads may hold: to spawn onto it, count its fibers, dump them.
    ///
    /// ```
    /// let rt = fibra::Runtime::new()?;
    /// let handle = rt.handle();
    /// let h = std::thread::spawn(move || handle.spawn(|| 7)).join().unwrap();
    /// // Started the next time the runtime is driven.
    /// assert_eq!(rt.block_on(|| h.join().unwrap()), 7);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn handle(&self) -> crate::runtime::Handle {
        crate::runtime::Handle::of_core(self.core())
    }

    /// This runtime's id in the registry (for tests).
    #[cfg(test)]
    pub(crate) fn id(&self) -> crate::scheduler::registry::RuntimeId {
        self.core().id
    }
}

impl AsRawFd for Runtime {
    /// The runtime's epoll fd: readable when the runtime has work (a ready
    /// fiber, an I/O event, an expired timer, a wake-up from another thread).
    /// Call [`Runtime::turn`] when it is.
    fn as_raw_fd(&self) -> RawFd {
        // SAFETY: on the runtime's thread (Runtime is !Send); short borrow.
        unsafe { self.core().local() }.reactor.fd()
    }
}

impl Drop for CurrentThread {
    /// Cancels every fiber left, unwinding each from where it is parked so
    /// its destructors run, and waits until all have finished.
    ///
    /// Except while the thread destroys its thread-locals (a runtime kept
    /// in a `thread_local!`, dropped at thread exit): then the fibers left
    /// are leaked, stacks and all, neither resumed nor dropped, because a
    /// fiber parked inside `LocalKey::with` may borrow a thread-local that
    /// is already gone. See [`Runtime`]'s docs.
    fn drop(&mut self) {
        crate::scheduler::owner::disown(&self.core.0);
        // Off gdb's list first: a close that panics leaves no stale entry.
        crate::observe::debugger::unregister(&self.core.0);
        close(&self.core.0);
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("fd", &self.as_raw_fd())
            .field("fibers", &self.fibers())
            .finish()
    }
}
