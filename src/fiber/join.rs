//! Waiting for a fiber: [`JoinHandle`], [`JoinError`], and the packet the
//! fiber leaves its result in.

use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::fiber::Fiber;
use crate::runtime::context;
use crate::runtime::core::{FiberId, Key};
use crate::runtime::park::{Unparker, park_current};
use crate::runtime::shared::{Remote, Shared};

const DONE: u8 = 1;
const WAITING: u8 = 2;

/// Where a fiber leaves its result for its [`JoinHandle`].
///
/// # Invariant
///
/// `result` is written once, by the fiber, before `DONE` is set (Release);
/// it is read only by the handle after it saw `DONE` (Acquire). `waiter` is
/// written only by the handle, before it sets `WAITING`; the fiber takes it
/// only if it saw `WAITING` when it set `DONE`, and the handle touches it
/// again only if it saw `DONE` when it set `WAITING`.
pub(crate) struct Packet<T> {
    state: AtomicU8,
    result: UnsafeCell<Option<Result<T, JoinError>>>,
    waiter: UnsafeCell<Option<Unparker>>,
    /// For a scoped fiber: told when an unjoined result was a panic.
    pub(crate) scope: Option<*const crate::fiber::scope::ScopeData>,
}

// SAFETY: the state protocol above serialises every access to the cells;
// the result crosses threads, hence `T: Send`. `scope` is only dereferenced
// on the scope's own thread (scoped fibers never leave it).
unsafe impl<T: Send> Send for Packet<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Packet<T> {}

impl<T> Packet<T> {
    pub(crate) fn new() -> Packet<T> {
        Packet {
            state: AtomicU8::new(0),
            result: UnsafeCell::new(None),
            waiter: UnsafeCell::new(None),
            scope: None,
        }
    }

    /// Called once by the fiber with its result; wakes a waiting joiner.
    pub(crate) fn complete(&self, result: Result<T, JoinError>) {
        // SAFETY: only the fiber writes `result`, once, before DONE.
        unsafe { *self.result.get() = Some(result) };
        let previous = self.state.fetch_or(DONE, Ordering::AcqRel);
        if previous & WAITING != 0 {
            // SAFETY: the handle wrote `waiter` before setting WAITING and
            // will not touch it again (it saw no DONE).
            if let Some(waiter) = unsafe { (*self.waiter.get()).take() } {
                waiter.unpark();
            }
        }
    }

    fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) & DONE != 0
    }
}

impl<T> Drop for Packet<T> {
    fn drop(&mut self) {
        if let Some(scope) = self.scope
            && matches!(self.result.get_mut(), Some(Err(e)) if e.is_panic())
        {
            // SAFETY: a scoped packet dies inside its scope, on its thread.
            unsafe { (*scope).a_fiber_panicked.set(true) };
        }
    }
}

/// Where a fiber lives, to cancel it.
pub(crate) struct FiberRef {
    pub(crate) shared: Arc<Shared>,
    pub(crate) key: Key,
}

/// Cancels the fiber `id` in slot `key` of the runtime `shared`: directly on
/// its own thread inside its runtime, by message otherwise.
pub(crate) fn cancel_fiber(shared: &Arc<Shared>, key: Key, id: FiberId) {
    match context::current() {
        Some(core) if Arc::ptr_eq(&core.shared, shared) => core.cancel(key, id),
        _ => shared.send(Remote::Cancel(key, id)),
    }
}

/// An owned permission to join a fiber (wait for its result), or to cancel
/// it. Dropping the handle detaches the fiber: it runs on.
///
/// `JoinHandle<T>` is `Send` and `Sync` when `T` is `Send`: a thread may join
/// a fiber, and fibers of different runtimes may join each other.
pub struct JoinHandle<T> {
    packet: Arc<Packet<T>>,
    at: FiberRef,
    fiber: Fiber,
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(packet: Arc<Packet<T>>, at: FiberRef, fiber: Fiber) -> JoinHandle<T> {
        JoinHandle { packet, at, fiber }
    }

    /// Waits for the fiber to finish and returns its result: `Ok` with its
    /// return value, or a [`JoinError`] if it panicked or was cancelled.
    ///
    /// From a fiber this parks the fiber; from a plain thread it blocks the
    /// thread.
    ///
    /// # Panics
    ///
    /// When the wait could never end: joining, from the runtime's own thread
    /// but outside it, a fiber that has not finished (nothing would run it).
    ///
    /// ```
    /// fibra::run(|| {
    ///     let h = fibra::spawn(|| 7);
    ///     assert_eq!(h.join().unwrap(), 7);
    ///     let h = fibra::spawn(|| panic!("boom"));
    ///     assert!(h.join().unwrap_err().is_panic());
    /// });
    /// ```
    #[track_caller]
    pub fn join(self) -> Result<T, JoinError> {
        let packet = &self.packet;
        if !packet.is_done() {
            let waiter = match context::current() {
                // Joined from its own runtime: it completes right here.
                Some(core) if Arc::ptr_eq(&core.shared, &self.at.shared) => Unparker::local(core),
                _ => {
                    self.check_can_finish();
                    Unparker::current()
                }
            };
            // SAFETY: WAITING is not set, so the fiber does not read `waiter`.
            unsafe { *packet.waiter.get() = Some(waiter) };
            let previous = packet.state.fetch_or(WAITING, Ordering::AcqRel);
            if previous & DONE == 0 {
                while !packet.is_done() {
                    park_current(None);
                }
            }
        }
        // SAFETY: DONE was seen with Acquire: the result is written and the
        // fiber no longer touches it; `self` is consumed, so this is the only read.
        unsafe { (*packet.result.get()).take() }.expect("fibra: a fiber's result was taken twice")
    }

    /// Called when joining from outside the fiber's runtime.
    #[track_caller]
    fn check_can_finish(&self) {
        if self.at.shared.owner == std::thread::current().id() {
            panic!(
                "JoinHandle::join would wait forever: fiber {} belongs to a runtime of \
                 this thread that is not running. Join it inside that runtime, e.g. \
                 `rt.block_on(|| handle.join())`.",
                self.fiber.id()
            );
        }
    }

    /// Asks the fiber to stop: it unwinds from the park it is in (or its
    /// next park, sleep, yield or blocking call), running its destructors,
    /// and its `join` returns a [`JoinError`] for which
    /// [`is_cancelled`](JoinError::is_cancelled) holds. A fiber that has not
    /// started never runs. Cancelling a finished fiber does nothing.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// fibra::run(|| {
    ///     let h = fibra::spawn(|| fibra::sleep(Duration::from_secs(3600)));
    ///     fibra::yield_now(); // let it start sleeping
    ///     h.cancel();
    ///     assert!(h.join().unwrap_err().is_cancelled());
    /// });
    /// ```
    pub fn cancel(&self) {
        if !self.packet.is_done() {
            cancel_fiber(&self.at.shared, self.at.key, self.fiber.id());
        }
    }

    /// Where the fiber lives: its runtime, slot and id.
    pub(crate) fn location(&self) -> (Arc<Shared>, Key, FiberId) {
        (self.at.shared.clone(), self.at.key, self.fiber.id())
    }

    /// Whether the fiber has finished (`join` would not wait).
    ///
    /// ```
    /// fibra::run(|| {
    ///     let h = fibra::spawn(|| ());
    ///     assert!(!h.is_finished());
    ///     fibra::yield_now();
    ///     assert!(h.is_finished());
    /// });
    /// ```
    pub fn is_finished(&self) -> bool {
        self.packet.is_done()
    }

    /// The fiber this handle joins.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let h = fibra::Builder::new().name("cook".into()).spawn(|| ()).unwrap();
    ///     assert_eq!(h.fiber().name(), Some("cook"));
    /// });
    /// ```
    pub fn fiber(&self) -> &Fiber {
        &self.fiber
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("fiber", &self.fiber)
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// Why a fiber gave no result: it panicked, or it was cancelled.
pub struct JoinError {
    id: FiberId,
    repr: Repr,
}

enum Repr {
    Cancelled,
    Panic(Box<dyn Any + Send + 'static>),
}

impl JoinError {
    pub(crate) fn cancelled(id: FiberId) -> JoinError {
        JoinError {
            id,
            repr: Repr::Cancelled,
        }
    }

    pub(crate) fn panic(id: FiberId, payload: Box<dyn Any + Send + 'static>) -> JoinError {
        JoinError {
            id,
            repr: Repr::Panic(payload),
        }
    }

    /// Whether the fiber was cancelled (by [`JoinHandle::cancel`] or by
    /// dropping its runtime).
    ///
    /// ```
    /// fibra::run(|| {
    ///     let h = fibra::spawn(|| ());
    ///     h.cancel(); // before it ever ran
    ///     assert!(h.join().unwrap_err().is_cancelled());
    /// });
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// Whether the fiber panicked.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let err = fibra::spawn(|| panic!("no")).join().unwrap_err();
    ///     assert!(err.is_panic());
    /// });
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The panic's payload, to re-raise it with
    /// [`std::panic::resume_unwind`] or inspect it.
    ///
    /// # Panics
    ///
    /// When the fiber was cancelled rather than panicking; see
    /// [`try_into_panic`](Self::try_into_panic).
    ///
    /// ```
    /// fibra::run(|| {
    ///     let err = fibra::spawn(|| panic!("boom")).join().unwrap_err();
    ///     assert_eq!(*err.into_panic().downcast::<&str>().unwrap(), "boom");
    /// });
    /// ```
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic()
            .expect("`JoinError::into_panic` on a fiber that was cancelled, not panicked")
    }

    /// The panic's payload, or the error back if the fiber was cancelled.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let h = fibra::spawn(|| ());
    ///     h.cancel();
    ///     assert!(h.join().unwrap_err().try_into_panic().is_err());
    /// });
    /// ```
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic(payload) => Ok(payload),
            Repr::Cancelled => Err(self),
        }
    }

    /// The id of the fiber that failed.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let h = fibra::spawn(|| panic!());
    ///     let id = h.fiber().id();
    ///     assert_eq!(h.join().unwrap_err().id(), id);
    /// });
    /// ```
    pub fn id(&self) -> FiberId {
        self.id
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => write!(f, "fiber {} was cancelled", self.id),
            Repr::Panic(p) => match panic_message(p.as_ref()) {
                Some(msg) => write!(f, "fiber {} panicked: {msg}", self.id),
                None => write!(f, "fiber {} panicked", self.id),
            },
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => write!(f, "JoinError::Cancelled({})", self.id),
            Repr::Panic(p) => write!(
                f,
                "JoinError::Panic({}, {:?})",
                self.id,
                panic_message(p.as_ref()).unwrap_or("...")
            ),
        }
    }
}

impl std::error::Error for JoinError {}

impl From<JoinError> for std::io::Error {
    fn from(e: JoinError) -> std::io::Error {
        std::io::Error::other(e.to_string())
    }
}
