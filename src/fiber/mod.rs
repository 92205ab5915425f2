//! Fibers: spawning, identity, yielding.
//!
//! A fiber is a function running on a stack of its own, switched by
//! `asm/x86_64.S`. It runs until it blocks (sleep, join, a socket that would
//! block, a lock...), when its runtime switches to another ready fiber. A
//! fiber stays on the thread of the runtime that spawned it for its whole
//! life, so it may hold `Rc`s and `RefCell`s across blocking calls, and
//! borrows of thread-locals too — but a `thread_local!` initializer must
//! not block: see ["Thread-locals"](crate#thread-locals) in the crate docs.
//!
//! ```
//! use std::rc::Rc;
//! use std::cell::RefCell;
//!
//! fibra::run(|| {
//!     // No `Send` needed: fibers never leave this thread.
//!     let log = Rc::new(RefCell::new(Vec::new()));
//!     let handles: Vec<_> = (0..3)
//!         .map(|i| {
//!             let log = log.clone();
//!             fibra::spawn(move || {
//!                 log.borrow_mut().push(i);
//!                 fibra::yield_now();
//!                 log.borrow_mut().push(i + 10);
//!             })
//!         })
//!         .collect();
//!     handles.into_iter().for_each(|h| h.join().unwrap());
//!     assert_eq!(*log.borrow(), [0, 1, 2, 10, 11, 12]);
//! });
//! ```

mod builder;
pub(crate) mod entry;
pub(crate) mod fiber_ref;
mod group;
pub(crate) mod join;
mod join_error;
pub(crate) mod local;
pub(crate) mod packet;
pub(crate) mod queued;
pub(crate) mod scope;
pub(crate) mod scope_data;

pub use builder::Builder;
pub use group::Group;
pub use join::{JoinError, JoinHandle};
pub use local::{AccessError, FiberLocal};
pub use scope::{Scope, ScopedJoinHandle, scope};

pub(crate) use entry::spawn_on;

use std::sync::Arc;

pub use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::{context, park};

/// A handle to a fiber: its id and name. See [`current`].
#[derive(Clone, Debug)]
pub struct Fiber {
    pub(crate) id: FiberId,
    pub(crate) name: Option<Arc<str>>,
}

impl Fiber {
    /// The fiber's id, unique in the process.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let a = fibra::spawn(|| fibra::current().id());
    ///     let b = fibra::spawn(|| fibra::current().id());
    ///     assert_ne!(a.join().unwrap(), b.join().unwrap());
    /// });
    /// ```
    pub fn id(&self) -> FiberId {
        self.id
    }

    /// The fiber's name, if it was given one with [`Builder::name`].
    ///
    /// ```
    /// fibra::run(|| {
    ///     let h = fibra::Builder::new()
    ///         .name("reader".to_string())
    ///         .spawn(|| fibra::current().name().map(str::to_owned))
    ///         .unwrap();
    ///     assert_eq!(h.join().unwrap().as_deref(), Some("reader"));
    /// });
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

/// The fiber calling this. Inside `block_on`'s closure, the runtime's root
/// context (which has an id but no name).
///
/// # Panics
///
/// Outside a fibra runtime.
///
/// ```
/// fibra::run(|| {
///     let me = fibra::current();
///     assert!(me.name().is_none());
/// });
/// ```
#[track_caller]
pub fn current() -> Fiber {
    let (id, name) = context::expect("fibra::current").current_fiber();
    Fiber { id, name }
}

/// The fiber calling this, or `None` outside a fibra runtime (where
/// [`current`] panics). Inside `block_on`'s closure, the runtime's root
/// context.
///
/// ```
/// assert!(fibra::try_current().is_none());
/// fibra::run(|| {
///     let h = fibra::Builder::new()
///         .name("probe".to_string())
///         .spawn(|| fibra::try_current().unwrap().name().map(str::to_owned))
///         .unwrap();
///     assert_eq!(h.join().unwrap().as_deref(), Some("probe"));
/// });
/// ```
pub fn try_current() -> Option<Fiber> {
    let (id, name) = context::current()?.current_fiber();
    Some(Fiber { id, name })
}

/// Spawns a fiber on the current runtime and returns its [`JoinHandle`].
///
/// The fiber starts running when the caller next blocks or yields, behind
/// the fibers already ready. It stays on this thread, so `f` need not be
/// `Send`. Its stack has the runtime's default size; use [`Builder`] for
/// another size, a name, or to handle a failure to map the stack.
///
/// # Thread-locals
///
/// The fibers of a thread share its thread-locals. A fiber may park inside
/// `KEY.with(..)`, but **a `thread_local!` initializer must not park**: a
/// second fiber would initialise the key again and have its value dropped
/// under it when the first initializer returns. Make such values with
/// [`sync::OnceLock`](crate::sync::OnceLock) or
/// [`sync::LazyLock`](crate::sync::LazyLock) instead; see
/// ["Thread-locals"](crate#thread-locals).
///
/// # Panics
///
/// Outside a fibra runtime, or if the stack cannot be mapped.
///
/// ```
/// fibra::run(|| {
///     let h = fibra::spawn(|| 40 + 2);
///     assert_eq!(h.join().unwrap(), 42);
/// });
/// ```
#[inline]
#[track_caller]
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + 'static,
    T: 'static,
{
    let core = context::expect("fibra::spawn");
    match spawn_on(core, f, None, core.default_stack, false) {
        Ok(handle) => handle,
        Err(e) => cannot_spawn(e),
    }
}

/// The panic of a failed [`spawn`], out of line: a spawn stays small enough
/// to be inlined into its caller.
#[cold]
#[inline(never)]
#[track_caller]
fn cannot_spawn(e: std::io::Error) -> ! {
    panic!("fibra::spawn: cannot create a fiber: {e}")
}

/// Lets every other ready fiber run, then continues: the caller goes behind
/// all of them (FIFO). Outside a runtime, yields the thread.
///
/// A yield is a park point: a cancelled fiber, or one whose
/// [`timeout`](crate::timeout) has expired, unwinds here.
///
/// ```
/// use std::{cell::Cell, rc::Rc};
///
/// fibra::run(|| {
///     let turns = Rc::new(Cell::new(0));
///     let t = turns.clone();
///     fibra::spawn(move || t.set(t.get() + 1));
///     assert_eq!(turns.get(), 0);
///     fibra::yield_now();
///     assert_eq!(turns.get(), 1);
/// });
/// ```
// Inlined into the caller: one frame fewer between the caller and the
// switch (`Core::switch_to`), so a yield does not pay the call, return and
// five register saves and restores of a frame of its own (about 2 ns a
// yield on the Zen 4 host: `-- switch`, README).
#[inline]
pub fn yield_now() {
    match context::current() {
        Some(core) => {
            park::yield_current(core);
        }
        None => std::thread::yield_now(),
    }
}
