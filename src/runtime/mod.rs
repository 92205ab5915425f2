//! Runtimes: a scheduler, a reactor and a timer wheel on one thread.
//!
//! A [`Runtime`] runs fibers on the thread that drives it. Drive it in one of
//! three ways:
//!
//! - [`Runtime::block_on`] runs a closure on the thread's own stack as the
//!   runtime's *root*; while the closure is blocked (it sleeps, joins, reads
//!   a socket), the runtime's fibers run. [`fibra::run`](crate::run) is the
//!   one-line form.
//! - [`Runtime::run`] runs fibers until none is left: the `async_run` loop.
//! - [`Runtime::turn`] runs one step and returns, for an outer event loop; the
//!   runtime's fd ([`AsRawFd`](std::os::fd::AsRawFd)) is readable whenever
//!   it has work.
//!
//! ```
//! use std::time::Duration;
//!
//! let rt = fibra::Runtime::new()?;
//! let h = rt.spawn(|| {
//!     fibra::sleep(Duration::from_millis(5));
//!     6 * 7
//! });
//! rt.run();
//! assert_eq!(h.join().unwrap(), 42);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A runtime and its fibers belong to the thread that created it: `Runtime`
//! is neither `Send` nor `Sync`, and a fiber never moves to another thread.
//!
//! ## Runtimes of several workers
//!
//! [`Builder::workers`] makes a `Runtime<Workers>`: `n` threads, each with a
//! runtime of its own, that run without the caller driving them. Fibers
//! spawned with [`Runtime::spawn`](Runtime#method.spawn-1) (`F: Send`) are
//! spread over the workers, and [`fibra::spawn`](crate::spawn) inside a fiber
//! keeps the new fiber on the caller's worker (`F` need not be `Send`).
//! A worker with nothing to run takes fibers that have not started yet from
//! a busy one; a fiber that has started never changes thread, so it may keep
//! `Rc`s and borrows of thread-locals across blocking calls (a
//! `thread_local!` initializer must not block, though: see
//! ["Thread-locals"](crate#thread-locals)).
//!
//! ```
//! use std::thread;
//!
//! let rt = fibra::Runtime::builder().workers(2).build()?;
//! let handles: Vec<_> = (0..8)
//!     .map(|_| {
//!         rt.spawn(|| {
//!             let me = thread::current().id();
//!             fibra::sleep(std::time::Duration::from_millis(1));
//!             assert_eq!(thread::current().id(), me); // never migrates
//!         })
//!     })
//!     .collect();
//! rt.block_on(|| handles.into_iter().for_each(|h| h.join().unwrap()));
//! # Ok::<(), std::io::Error>(())
//! ```

mod builder;
mod current_thread;
mod dump;
#[cfg(feature = "futures-io")]
pub(crate) mod fallback;
mod workers;

pub use crate::scheduler::fiber_info::{Dump, FiberInfo, FiberState};
pub use crate::scheduler::metrics::WorkerMetrics;
pub use crate::scheduler::stack_trace::{StackFrame, StackTrace};
pub use builder::Builder;
pub use current_thread::CurrentThread;
pub use dump::dump_on_sigquit;
pub use workers::Workers;

/// A fiber runtime. See the [module docs](self).
///
/// `Runtime` (that is, `Runtime<CurrentThread>`) runs on the thread that
/// drives it and cannot leave it:
///
/// ```compile_fail
/// let rt = fibra::Runtime::new().unwrap();
/// std::thread::spawn(move || drop(rt));
/// ```
///
/// `Runtime<Workers>`, from [`Builder::workers`], runs on threads of its own
/// and may be shared between threads.
///
/// # Dropping
///
/// Dropping a runtime cancels the fibers left in it: each is unwound from
/// where it is parked, so its destructors run. One exception: a runtime
/// dropped while its thread destroys its thread-locals (one kept in a
/// `thread_local!`, say, dropped when the thread exits) *leaks* its
/// fibers and their stacks instead — none is resumed or dropped, and
/// their `JoinHandle`s never complete — because a fiber parked inside
/// `LocalKey::with` borrows that thread-local, which std may already have
/// destroyed (std orders those destructors as if `with` scopes nested on a
/// thread; fibers interleave them). Likewise `block_on`, `run` and `turn`
/// panic then if the runtime has fibers. fibra learns that destruction has
/// begun from a thread-local of its own, registered the first time a
/// runtime on the thread is left with fibers alive; it cannot tell when a
/// runtime that was first left with fibers, then stored in a thread-local
/// first used after that, holds a fiber that borrows a thread-local first
/// used later still: don't make a runtime's owner a thread-local newer
/// than the runtime's first fibers.
///
/// ```
/// use std::cell::RefCell;
///
/// thread_local! {
///     static RT: fibra::Runtime = fibra::Runtime::new().unwrap();
///     static NAME: RefCell<String> = RefCell::new("conn".into());
/// }
///
/// std::thread::spawn(|| {
///     RT.with(|rt| {
///         rt.block_on(|| {
///             fibra::spawn(|| {
///                 NAME.with(|name| {
///                     // Parks forever, borrowing NAME. At thread exit NAME
///                     // is destroyed before RT: RT's drop leaks this fiber
///                     // rather than unwind it into a freed `String`.
///                     fibra::sleep(std::time::Duration::from_secs(3600));
///                     println!("{}", name.borrow());
///                 })
///             });
///             fibra::yield_now();
///         })
///     });
/// })
/// .join()
/// .unwrap();
/// ```
pub struct Runtime<Flavor = CurrentThread> {
    flavor: Flavor,
}

impl<Flavor> Runtime<Flavor> {
    pub(crate) fn from_flavor(flavor: Flavor) -> Runtime<Flavor> {
        raise_fd_limit();
        Runtime { flavor }
    }
}

/// Raises the soft open-file limit to the hard limit, once per process, as Go
/// does: a server of many connections should not die of a default of 1024.
fn raise_fd_limit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: valid out-pointer / in-pointer to an rlimit.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
                lim.rlim_cur = lim.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
        }
    });
}

/// Runs `f` in a new runtime on this thread and returns what it returns;
/// fibers still alive then are cancelled. See [`Runtime::block_on`].
///
/// # Panics
///
/// When the runtime cannot be created, or when called from a fiber or from
/// inside `block_on`. A panic of `f` is re-raised.
///
/// ```
/// let sum = fibra::run(|| {
///     let handles: Vec<_> = (1..=10).map(|i| fibra::spawn(move || i)).collect();
///     handles.into_iter().map(|h| h.join().unwrap()).sum::<i32>()
/// });
/// assert_eq!(sum, 55);
/// ```
#[track_caller]
pub fn run<T>(f: impl FnOnce() -> T) -> T {
    Runtime::new()
        .expect("fibra::run: cannot create a runtime")
        .block_on(f)
}
