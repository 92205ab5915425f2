//! Fibers sent to a runtime of workers: a [`Job`] waits in a worker's inbox
//! until some worker starts it, maybe not the one it was sent to (an idle
//! worker takes jobs from a busy one). Until it starts, a job is just a
//! `Send` closure, so handing it to another thread is sound; once started it
//! is a fiber like any other and never leaves its worker.
//!
//! The job's [`JoinHandle`] cannot name the fiber's slot before it starts:
//! it holds a [`Placement`] that the starting worker fills in, so `cancel`
//! works at every stage.

use std::alloc::Layout;
use std::sync::Arc;

use crate::fiber::entry::start_fiber;
use crate::fiber::fiber_ref::{FiberRef, Placement};
use crate::fiber::join::{FiberEnd, JoinError, JoinHandle, packet};
use crate::scheduler::core::Core;
use crate::scheduler::core::job::Job;
use crate::scheduler::fiber_id::FiberId;

/// What makes a [`Job`] (the worker pool's type) out of a closure: the
/// pool moves jobs between threads and starts them, and knows nothing of
/// fibers; this fills one with the start of a fiber and its join handle.
impl Job {
    /// A job running `f`, and the handle to join it.
    #[track_caller]
    pub(crate) fn new<F, T>(f: F) -> (Job, JoinHandle<T>)
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        // SAFETY: everything is 'static.
        unsafe { Job::new_unchecked(f) }
    }

    /// Like [`Job::new`] for a closure that borrows.
    ///
    /// # Safety
    ///
    /// What `f` and `T` borrow must outlive the job: the caller waits until
    /// the handle's result is in (which happens after the fiber dropped
    /// everything of `f`, or after the job was dropped unrun).
    #[track_caller]
    pub(crate) unsafe fn new_unchecked<'a, F, T>(f: F) -> (Job, JoinHandle<T>)
    where
        F: FnOnce() -> T + Send + 'a,
        T: Send + 'a,
    {
        let id = FiberId::next();
        let placement = Arc::new(Placement::queued());
        let at = FiberRef::Queued(placement.clone());
        let (fiber_end, handle_end) = packet(None, None, id, None, at, Layout::new::<()>());
        let mut unstarted = Unstarted {
            f: Some(f),
            end: Some(fiber_end),
            id,
        };
        let placed = placement.clone();
        let location = std::panic::Location::caller();
        let start = move |core: &Core| {
            let stack = match core.take_stack(core.default_stack) {
                Ok(stack) => stack,
                Err(e) => {
                    tracing::error!(error = %e, fiber = id.as_u64(), "cannot start a fiber");
                    let message = format!("fibra: cannot map the stack of fiber {id}: {e}");
                    unstarted.fail(JoinError::panic(id, None, Box::new(message)));
                    return;
                }
            };
            let (Some(f), Some(end)) = (unstarted.f.take(), unstarted.end.take()) else {
                unreachable!("a job starts once");
            };
            // SAFETY: forwarded from `new_unchecked`'s caller.
            let key = unsafe { start_fiber(core, stack, f, end, id, None, None, location) };
            if placed.place(core.id, key) {
                core.cancel(key, id);
            }
        };
        let start: Box<dyn FnOnce(&Core) + Send + 'a> = Box::new(start);
        // SAFETY: only the lifetime changes; the caller keeps what the
        // closure borrows alive until the job has run or been dropped.
        let start: Box<dyn FnOnce(&Core) + Send + 'static> = unsafe { std::mem::transmute(start) };
        (Job::from_start(start), JoinHandle::new(handle_end))
    }
}

/// A job's closure and its end of the packet until the fiber exists:
/// dropped unrun, the job reports that the fiber was cancelled.
struct Unstarted<F, T> {
    f: Option<F>,
    end: Option<FiberEnd<T>>,
    id: FiberId,
}

impl<F, T> Unstarted<F, T> {
    /// Completes the handle with `error`. The closure is dropped first:
    /// once the result is in, a `block_on` caller ends the borrows the
    /// closure may hold.
    fn fail(&mut self, error: JoinError) {
        // On a worker's own stack: a panicking destructor must not unwind
        // the worker.
        let f = self.f.take();
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(f)));
        if let Some(end) = self.end.take() {
            end.complete(Err(error));
        }
    }
}

impl<F, T> Drop for Unstarted<F, T> {
    fn drop(&mut self) {
        let id = self.id;
        self.fail(JoinError::cancelled(id, None));
    }
}
