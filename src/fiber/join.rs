//! Waiting for a fiber: [`JoinHandle`]. The packet the fiber leaves its
//! result in is in `packet.rs`, [`JoinError`] in `join_error.rs`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::fiber::Fiber;
use crate::scheduler::context;
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::park::Unparker;
use crate::scheduler::registry::{self, RuntimeId};

pub(crate) use crate::fiber::fiber_ref::FiberRef;
pub use crate::fiber::join_error::JoinError;
pub(crate) use crate::fiber::packet::{FiberEnd, HandleEnd, Packet, packet};

/// An owned permission to join a fiber (wait for its result), or to cancel
/// it. Dropping the handle detaches the fiber: it runs on.
///
/// `JoinHandle<T>` is `Send` and `Sync` when `T` is `Send`: a thread may join
/// a fiber, and fibers of different runtimes may join each other.
pub struct JoinHandle<T> {
    packet: HandleEnd<T>,
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(packet: HandleEnd<T>) -> JoinHandle<T> {
        JoinHandle { packet }
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
        let packet = self.packet;
        let Packet { fiber, at, .. } = packet.packet();
        let here = context::current();
        // A fiber in its runtime's slot `key` is the running one only if
        // `key` is the running key: one compare of keys, the ids only when
        // they are equal (or the fiber was sent to a worker).
        if let Some(core) = here
            && match at {
                FiberRef::At { key, .. } => core.current_key() == *key,
                FiberRef::Queued(_) => true,
            }
            && core.current_id() == fiber.id()
        {
            joined_itself(fiber.id());
        }
        packet.wait(
            |slot| match (here, at) {
                // Joined from its own runtime: it completes right here.
                (Some(core), FiberRef::At { runtime, .. }) if core.id == *runtime => {
                    *slot = Some(Unparker::local(core));
                    true
                }
                (_, FiberRef::At { runtime, .. }) => {
                    check_can_finish(*runtime, fiber.id());
                    *slot = Some(Unparker::current());
                    false
                }
                // On a worker: never this thread outside its runtime.
                (_, FiberRef::Queued(_)) => {
                    *slot = Some(Unparker::current());
                    false
                }
            },
            fiber.id(),
        )
    }

    /// Asks the fiber to stop: it unwinds from the park it is in, running
    /// its destructors, and its `join` returns a [`JoinError`] for which
    /// [`is_cancelled`](JoinError::is_cancelled) holds. A fiber that has not
    /// started never runs. Cancelling a finished fiber does nothing.
    ///
    /// The cancellation points, from this thread or any other: every park
    /// (a call that blocks, at the moment it would block), and every
    /// [`sleep`](crate::sleep), [`sleep_until`](crate::sleep_until) and
    /// [`yield_now`](crate::yield_now), even a sleep that is already due. A
    /// call that completes without blocking (an uncontended lock, a `recv`
    /// with a message waiting, a read with data ready) is not one, as in
    /// tokio, where an abort lands at the next `Pending`: checking there
    /// would put a read of the cross-thread queue on every fast path. A
    /// loop that never blocks is cancelled at its next `yield_now`.
    ///
    /// With the `hook` feature, a call into C that waits when the cancel
    /// lands (a std socket call, a C client library's, a `select`) cannot
    /// be unwound: it fails with `ECANCELED` (std: an `io::Error` of that
    /// code; a `connect` is aborted, leaving its socket unconnected), and
    /// the fiber unwinds at its next fibra park. Code that stops at that
    /// error and returns makes the fiber finish normally: its `join` then
    /// returns its value, not a cancelled [`JoinError`].
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
        let packet = self.packet.packet();
        if !self.packet.is_done() {
            packet.at.cancel(packet.fiber.id());
        }
    }

    /// Where the fiber lives, to cancel it later.
    pub(crate) fn location(&self) -> FiberRef {
        self.packet.packet().at.clone()
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

    /// Has `unparker` woken when the fiber finishes (for a `select`, which
    /// then finds it finished); `false` if it is finishing already.
    pub(crate) fn wake_when_finished(&self, unparker: crate::scheduler::park::Unparker) -> bool {
        let put = |slot: &mut Option<crate::scheduler::park::Unparker>| {
            *slot = Some(unparker);
            false // woken from wherever the fiber finishes
        };
        matches!(
            self.packet.register(put),
            crate::fiber::packet::Registered::Waiting
        )
    }

    /// The result of a fiber that has finished (a `select` saw it), taken
    /// out of the handle: a later `join` panics.
    pub(crate) fn take_finished(&self) -> Result<T, JoinError> {
        self.packet.finish_wait();
        self.packet.take_result()
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
        &self.packet.packet().fiber
    }
}

/// Async code can await a fiber: the output is what [`join`](JoinHandle::join)
/// returns. The fiber's runtime may run on any thread; its end wakes the
/// awaiting task through its `Waker`.
///
/// ```
/// use std::future::Future;
/// use std::pin::pin;
/// use std::task::{Context, Poll, Waker};
///
/// fibra::run(|| {
///     let h = fibra::spawn(|| 5);
///     fibra::yield_now(); // let it finish
///     let mut h = pin!(h);
///     let mut cx = Context::from_waker(Waker::noop());
///     assert!(matches!(h.as_mut().poll(&mut cx), Poll::Ready(Ok(5))));
/// });
/// ```
impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.packet.poll(cx)
    }
}

/// The panic of a fiber that joins itself, at the caller's line.
#[cold]
#[inline(never)]
#[track_caller]
fn joined_itself(id: FiberId) -> ! {
    panic!("JoinHandle::join: fiber {id} joined itself, and would wait forever");
}

/// Panics when a join from outside the fiber's runtime could never end:
/// the runtime belongs to this very thread, which is not running it.
#[track_caller]
fn check_can_finish(runtime: RuntimeId, id: FiberId) {
    if let Some(shared) = registry::get(runtime)
        && shared.owner == std::thread::current().id()
    {
        panic!(
            "JoinHandle::join would wait forever: fiber {id} belongs to a runtime of \
             this thread that is not running. Join it inside that runtime, e.g. \
             `rt.block_on(|| handle.join())`."
        );
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("fiber", self.fiber())
            .field("finished", &self.is_finished())
            .finish()
    }
}
