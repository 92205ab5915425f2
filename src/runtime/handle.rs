//! [`Handle`]: the running runtime, reached from any of its fibers or from
//! another thread, in tokio's names.
//!
//! A handle holds what other threads may touch of a runtime: the message
//! queue and the published figures of a current-thread runtime (its
//! `Shared`), or the pool of a runtime of workers. So it is `Send + Sync`
//! for both flavors; what only the runtime's own thread may touch (its
//! records, run queue and stacks) is reached only when the handle is used
//! on that thread, through the thread's entered scheduler.

use std::fmt;
use std::sync::Arc;

use crate::fiber::{self, JoinHandle};
use crate::observe::dump::Dump;
use crate::runtime::dump;
use crate::scheduler::context;
use crate::scheduler::core::Core;
use crate::scheduler::core::job::Job;
use crate::scheduler::metrics::WorkerMetrics;
use crate::scheduler::pool::Pool;
use crate::scheduler::shared::{Remote, Shared};

/// A handle to a running runtime: count its fibers, dump them, read its
/// metrics, and spawn onto it from any thread. `Clone + Send + Sync`, for
/// both flavors of [`Runtime`](crate::Runtime).
///
/// Get one with [`Handle::current`] inside the runtime (a fiber, or
/// `block_on`'s closure), or [`Runtime::handle`](crate::Runtime::handle)
/// from its owner, and hand it to other threads. It does not keep the
/// runtime alive: once the runtime is dropped, [`spawn`](Handle::spawn)
/// gives a handle whose [`join`](JoinHandle::join) says cancelled, and
/// the figures stay at their last values.
///
/// ```
/// use fibra::runtime::Handle;
///
/// fibra::run(|| {
///     let handle = Handle::current();
///     fibra::spawn(|| fibra::sleep(std::time::Duration::from_millis(10)));
///     assert_eq!(handle.fibers(), 1); // Go's runtime.NumGoroutine()
///     // From another thread: a fiber of this runtime.
///     let h = std::thread::spawn(move || handle.spawn(|| 6 * 7)).join().unwrap();
///     assert_eq!(h.join().unwrap(), 42);
/// });
/// ```
#[derive(Clone)]
pub struct Handle {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    CurrentThread(Arc<Shared>),
    Workers(Arc<Pool<Job>>),
}

impl Handle {
    /// The runtime the caller runs in: the one of the current fiber, or of
    /// the `block_on` (or `run`, `turn`) the thread is in.
    ///
    /// # Panics
    ///
    /// Outside a runtime; see [`Handle::try_current`].
    ///
    /// ```
    /// let rt = fibra::Runtime::builder().workers(2).build()?;
    /// let n = rt.block_on(|| fibra::runtime::Handle::current().metrics().len());
    /// assert_eq!(n, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn current() -> Handle {
        match Handle::try_current() {
            Some(handle) => handle,
            None => panic!(
                "fibra::runtime::Handle::current() called outside a fibra runtime: call it from \
                 a fiber or inside block_on, or keep the handle that Runtime::handle() gives"
            ),
        }
    }

    /// The runtime the caller runs in, or `None` outside one.
    ///
    /// ```
    /// use fibra::runtime::Handle;
    ///
    /// assert!(Handle::try_current().is_none());
    /// fibra::run(|| assert!(Handle::try_current().is_some()));
    /// ```
    pub fn try_current() -> Option<Handle> {
        context::current().map(Handle::of_core)
    }

    /// The handle of the runtime `core` belongs to.
    pub(crate) fn of_core(core: &Core) -> Handle {
        let inner = match core.pool() {
            Some(pool) => Inner::Workers(pool.clone()),
            None => Inner::CurrentThread(core.shared.clone()),
        };
        Handle { inner }
    }

    /// The handle of a runtime of workers.
    pub(crate) fn of_pool(pool: Arc<Pool<Job>>) -> Handle {
        Handle {
            inner: Inner::Workers(pool),
        }
    }

    /// The scheduler of this handle's current-thread runtime, when the
    /// caller runs inside it (a fiber of it, or its `block_on`).
    fn own_core(shared: &Arc<Shared>) -> Option<&'static Core> {
        context::current().filter(|core| Arc::ptr_eq(&core.shared, shared))
    }

    /// How many fibers the runtime has that have not finished (Go's
    /// `runtime.NumGoroutine()`). Exact on the runtime's own thread; from
    /// another thread, as the runtime last published it (at its last
    /// poll), as [`Runtime::<Workers>::fibers`](crate::Runtime::fibers)
    /// counts. A fiber spawned from another thread counts once the
    /// runtime has taken it up.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let handle = fibra::runtime::Handle::current();
    ///     let h = fibra::spawn(|| ());
    ///     assert_eq!(handle.fibers(), 1);
    ///     h.join().unwrap();
    ///     assert_eq!(handle.fibers(), 0);
    /// });
    /// ```
    pub fn fibers(&self) -> usize {
        self.metrics().iter().map(|m| m.alive + m.queued).sum()
    }

    /// The runtime's figures, one [`WorkerMetrics`] per worker (one for a
    /// current-thread runtime), as [`Runtime::metrics`](crate::Runtime::metrics)
    /// gives them.
    ///
    /// ```
    /// fibra::run(|| {
    ///     fibra::spawn(|| ());
    ///     let m = &fibra::runtime::Handle::current().metrics()[0];
    ///     assert_eq!((m.alive, m.ready), (1, 1));
    /// });
    /// ```
    pub fn metrics(&self) -> Vec<WorkerMetrics> {
        match &self.inner {
            Inner::Workers(pool) => pool.metrics(),
            Inner::CurrentThread(shared) => {
                let (alive, ready) = match Handle::own_core(shared) {
                    Some(core) => core.figures(),
                    None => shared.figures(),
                };
                vec![WorkerMetrics::current_thread(alive, ready)]
            }
        }
    }

    /// Every fiber of the runtime, with its id, name, state, what it waits
    /// for and its stack: see [`Dump`]. From the runtime's own thread it
    /// is taken at once; from another thread the runtime answers at its
    /// next poll (a runtime nobody drives, or one whose fiber computes
    /// without blocking, is listed as not answering after a second).
    ///
    /// ```
    /// fibra::run(|| {
    ///     fibra::Builder::new()
    ///         .name("sleeper".into())
    ///         .spawn(|| fibra::sleep(std::time::Duration::from_millis(50)))
    ///         .unwrap();
    ///     fibra::yield_now();
    ///     let dump = fibra::runtime::Handle::current().dump();
    ///     assert!(dump.to_string().contains("\"sleeper\""), "{dump}");
    /// });
    /// ```
    pub fn dump(&self) -> Dump {
        let targets = match &self.inner {
            Inner::Workers(pool) => pool.runtimes(),
            Inner::CurrentThread(shared) => vec![(shared.thread_name.clone(), shared.clone())],
        };
        dump::collect(targets, |target| match context::current() {
            // Asked from the runtime's own thread: it answers itself.
            Some(core) if Arc::ptr_eq(&core.shared, target) => Some(core.dump_section(true)),
            _ => None,
        })
    }

    /// Spawns a fiber onto the runtime from anywhere: one of its fibers,
    /// another runtime's, or a plain thread. `f` is `Send`, since it may
    /// cross threads; once started, the fiber stays on the thread that
    /// started it.
    ///
    /// On a current-thread runtime, a spawn from its own thread starts the
    /// fiber as [`fibra::spawn`](crate::spawn) does; one from another
    /// thread is queued, and the runtime starts it the next time it polls
    /// (it is woken for it, and its fd becomes readable: see
    /// [`Runtime::turn`](crate::Runtime::turn)), while it is driven by
    /// `block_on`, `run` or `turn`. On a runtime of workers it is
    /// [`Runtime::<Workers>::spawn`](crate::Runtime::spawn).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = fibra::Runtime::new()?;
    /// let handle = rt.handle();
    /// let h = std::thread::spawn(move || handle.spawn(|| "from a thread"))
    ///     .join()
    ///     .unwrap();
    /// assert_eq!(rt.block_on(|| h.join().unwrap()), "from a thread");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        match &self.inner {
            Inner::Workers(pool) => {
                let (job, handle) = Job::new(f);
                pool.submit(job, None);
                handle
            }
            Inner::CurrentThread(shared) => match Handle::own_core(shared) {
                Some(core) => match fiber::spawn_on(core, f, None, core.default_stack, false) {
                    Ok(handle) => handle,
                    Err(e) => panic!("fibra: cannot spawn a fiber: {e}"),
                },
                None => {
                    let (job, handle) = Job::new(f);
                    shared.send(Remote::Start(job));
                    handle
                }
            },
        }
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Inner::CurrentThread(shared) => f
                .debug_struct("Handle")
                .field("flavor", &"current_thread")
                .field("thread", &shared.thread_name)
                .finish(),
            Inner::Workers(pool) => f
                .debug_struct("Handle")
                .field("flavor", &"workers")
                .field("workers", &pool.workers())
                .finish(),
        }
    }
}
