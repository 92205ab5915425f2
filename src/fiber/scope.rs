//! Scoped fibers: fibers that may borrow from the caller's stack, like
//! `std::thread::scope`.
//!
//! Soundness rests on one promise: [`scope`] does not return, nor unwind,
//! nor stop running for good, while a fiber it spawned may still touch a
//! borrow. So its final wait ignores cancellation and `fibra::timeout`:
//! when either hits the waiting fiber, the scope cancels its own fibers,
//! waits for them to finish, and only then unwinds. And the scope's frame
//! pins its stack (`stack::pin`): a generator body cannot yield inside a
//! scope, so the frame is never suspended and abandoned, nor resumed after
//! its runtime is gone.

use std::any::Any;
use std::cell::Cell;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::ptr;

use crate::fiber::JoinHandle;
use crate::fiber::entry::{OnExit, spawn_unchecked};
use crate::fiber::scope_data::ScopeData;
use crate::scheduler::context;
use crate::scheduler::core::Core;
use crate::scheduler::park;
use crate::scheduler::wait_on::WaitOn;
use crate::stack::pin::StackPin;

/// A scope to spawn borrowing fibers in; see [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    data: ScopeData,
    /// The runtime the scope was opened in, which stays entered on this
    /// thread while the scope lives (the scope's frame pins its stack).
    core: *const Core,
    /// Invariance over 'scope, as in std: the scope must not shrink.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// Spawns fibers that may borrow non-`'static` data, and waits for all of
/// them before returning.
///
/// Fibers not joined explicitly are joined when the closure returns. If one
/// of them panicked and was not joined, `scope` panics after all have
/// finished.
///
/// # Panics
///
/// Outside a fibra runtime; and as described above.
///
/// ```
/// let mut words = vec!["a", "b"];
/// let total = std::cell::Cell::new(0);
/// fibra::run(|| {
///     fibra::scope(|s| {
///         s.spawn(|| total.set(total.get() + words.len()));
///         s.spawn(|| total.set(total.get() + 10));
///     });
/// });
/// words.push("c"); // the borrows have ended
/// assert_eq!(total.get(), 12);
/// ```
#[track_caller]
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    let core = context::expect("fibra::scope");
    // This frame keeps `core` and is borrowed by the fibers until
    // `wait_for_all` returns: it must not be suspended by a generator.
    let _pin = StackPin::new();
    let scope = Scope {
        data: ScopeData {
            running: Cell::new(0),
            a_fiber_panicked: Cell::new(false),
            owner: Cell::new(None),
            handles: Default::default(),
        },
        core,
        scope: PhantomData,
        env: PhantomData,
    };
    let result = panic::catch_unwind(AssertUnwindSafe(|| f(&scope)));
    let unwind = wait_for_all(core, &scope.data);
    match (result, unwind) {
        (Err(payload), _) => panic::resume_unwind(payload),
        (Ok(_), Some(payload)) => panic::resume_unwind(payload),
        (Ok(value), None) => {
            if scope.data.a_fiber_panicked.get() {
                panic!("a scoped fiber panicked");
            }
            value
        }
    }
}

/// Waits, uncancellably, until every fiber of the scope has finished.
/// Returns the unwind the owner owes (cancellation or an expired timeout)
/// that arrived meanwhile.
fn wait_for_all(core: &Core, data: &ScopeData) -> Option<Box<dyn Any + Send>> {
    let mut unwind: Option<Box<dyn Any + Send>> = None;
    while data.running.get() > 0 {
        let mut deadline = None;
        if unwind.is_none() && !core.current_is_unwinding() {
            match park::owed_unwind(core) {
                Ok(timeout) => deadline = timeout.map(|t| t.deadline),
                Err(payload) => {
                    unwind = Some(payload);
                    for cancel in data.handles.borrow().iter() {
                        cancel();
                    }
                }
            }
        }
        data.owner.set(Some(core.current_token()));
        park::park_uncancellable(core, deadline, WaitOn::Scope);
    }
    unwind
}

/// Called by each scoped fiber after everything of it is gone.
unsafe fn fiber_exited(data: *const ()) {
    // SAFETY: `data` is the ScopeData of a scope that waits for this call.
    let data = unsafe { &*data.cast::<ScopeData>() };
    let left = data.running.get() - 1;
    data.running.set(left);
    if left == 0
        && let Some(owner) = data.owner.get()
        && let Some(core) = context::current()
    {
        core.wake(owner, crate::scheduler::core::record::Wake::Unparked);
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Spawns a fiber that may borrow anything that outlives the scope.
    ///
    /// # Panics
    ///
    /// If the fiber's stack cannot be mapped.
    ///
    /// ```
    /// let data = [1, 2, 3];
    /// let sum = fibra::run(|| {
    ///     fibra::scope(|s| {
    ///         let h = s.spawn(|| data.iter().sum::<i32>());
    ///         h.join().unwrap()
    ///     })
    /// });
    /// assert_eq!(sum, 6);
    /// ```
    #[track_caller]
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + 'scope,
        T: 'scope,
    {
        let core = match context::current() {
            Some(core) if ptr::eq(core, self.core) => core,
            _ => panic!("a fibra::Scope was used outside the runtime it was opened in"),
        };
        let data: *const ScopeData = &self.data;
        let on_exit = OnExit {
            call: fiber_exited,
            data: data.cast(),
        };
        // The scope waits for `on_exit` of every fiber it spawned before its
        // borrows end (see `wait_for_all`, which cannot unwind), and its
        // frame can neither be abandoned nor outlive the runtime: it pins
        // its stack, so no generator suspends it, and a runtime never drops
        // a fiber's frames without running them to the end unless it leaks
        // the scope's fibers with them.
        // SAFETY: as argued just above.
        let spawned = unsafe {
            spawn_unchecked(
                core,
                f,
                None,
                core.default_stack,
                Some((on_exit, data)),
                false,
            )
        };
        let handle = spawned.expect("fibra::Scope::spawn: cannot create a fiber");
        self.data.running.set(self.data.running.get() + 1);
        let (at, id) = (handle.location(), handle.fiber().id());
        self.data
            .handles
            .borrow_mut()
            .push(Box::new(move || at.cancel(id)));
        ScopedJoinHandle {
            inner: handle,
            scope: PhantomData,
        }
    }
}

/// A handle to join a scoped fiber; see [`Scope::spawn`].
///
/// It stays on the scope's thread: its packet, when the handle frees it,
/// tells the scope (plain, unsynchronised state) whether the fiber panicked.
///
/// ```compile_fail
/// fibra::run(|| fibra::scope(|s| {
///     let h = s.spawn(|| 1);
///     std::thread::scope(|t| {
///         t.spawn(move || h.join());
///     });
/// }));
/// ```
pub struct ScopedJoinHandle<'scope, T> {
    inner: JoinHandle<T>,
    /// Borrows the scope, and is `!Send` and `!Sync`.
    scope: PhantomData<(&'scope (), *const ())>,
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Waits for the fiber and returns its result; see [`JoinHandle::join`].
    ///
    /// ```
    /// fibra::run(|| fibra::scope(|s| assert_eq!(s.spawn(|| 1).join().unwrap(), 1)));
    /// ```
    pub fn join(self) -> Result<T, super::JoinError> {
        self.inner.join()
    }

    /// Whether the fiber has finished.
    ///
    /// ```
    /// fibra::run(|| fibra::scope(|s| {
    ///     let h = s.spawn(|| ());
    ///     fibra::yield_now();
    ///     assert!(h.is_finished());
    /// }));
    /// ```
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }

    /// Cancels the fiber; see [`JoinHandle::cancel`].
    ///
    /// ```
    /// fibra::run(|| fibra::scope(|s| {
    ///     let h = s.spawn(|| fibra::sleep(std::time::Duration::from_secs(60)));
    ///     h.cancel();
    ///     assert!(h.join().unwrap_err().is_cancelled());
    /// }));
    /// ```
    pub fn cancel(&self) {
        self.inner.cancel()
    }

    /// The fiber.
    ///
    /// ```
    /// fibra::run(|| fibra::scope(|s| {
    ///     let h = s.spawn(|| fibra::current().id());
    ///     let id = h.fiber().id();
    ///     assert_eq!(h.join().unwrap(), id);
    /// }));
    /// ```
    pub fn fiber(&self) -> &super::Fiber {
        self.inner.fiber()
    }
}
