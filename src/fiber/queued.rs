//! Fibers sent to a runtime of workers: a [`Job`] waits in a worker's inbox
//! until some worker starts it, maybe not the one it was sent to (an idle
//! worker takes jobs from a busy one). Until it starts, a job is just a
//! `Send` closure, so handing it to another thread is sound; once started it
//! is a fiber like any other and never leaves its worker.
//!
//! The job's [`JoinHandle`] cannot name the fiber's slot before it starts:
//! it holds a [`Placement`] that the starting worker fills in, so `cancel`
//! works at every stage.
//!
//! A group's member sent to the workers ([`Job::member`]) carries the
//! group's [`JobHooks`]: its exit callback, as a spawned member's, and a
//! word to the group when the fiber is made on its worker, or when it
//! never will be.

use std::alloc::Layout;
use std::sync::Arc;

use crate::fiber::entry::{OnExit, start_fiber};
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

    /// A job running `f` as a member of a group, which `hooks` tell.
    ///
    /// # Safety
    ///
    /// `hooks`' functions may be called with their data from any thread,
    /// once each as [`JobHooks`] says.
    #[track_caller]
    pub(crate) unsafe fn member<F, T>(f: F, hooks: JobHooks) -> (Job, JoinHandle<T>)
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        // SAFETY: everything is 'static; the hooks are forwarded.
        unsafe { Job::build(f, Some(hooks)) }
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
        // SAFETY: forwarded from the caller.
        unsafe { Job::build(f, None) }
    }

    /// [`Job::new_unchecked`], with a group's `hooks` if it is a member.
    ///
    /// # Safety
    ///
    /// As for [`Job::new_unchecked`] and [`Job::member`].
    #[track_caller]
    unsafe fn build<'a, F, T>(f: F, hooks: Option<JobHooks>) -> (Job, JoinHandle<T>)
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
            hooks,
        };
        let placed = placement.clone();
        let location = std::panic::Location::caller();
        let start = move |core: &Core| {
            let stack = match core.take_stack(core.default_stack) {
                Ok(stack) => stack,
                Err(e) => {
                    let message = format!("fibra: cannot map the stack of fiber {id}: {e}");
                    crate::report::tell(
                        crate::report::Level::Error,
                        "fibra",
                        &message,
                        None,
                        || {
                            tracing::error!(error = %e, fiber = id.as_u64(), "cannot start a fiber");
                        },
                    );
                    unstarted.fail(JoinError::panic(id, None, Box::new(message)));
                    return;
                }
            };
            let (Some(f), Some(end)) = (unstarted.f.take(), unstarted.end.take()) else {
                unreachable!("a job starts once");
            };
            let hooks = unstarted.hooks.take();
            let on_exit = hooks.as_ref().map(|h| OnExit {
                call: h.on_exit,
                data: h.data,
            });
            // SAFETY: forwarded from `build`'s caller.
            let key = unsafe { start_fiber(core, stack, f, end, id, None, on_exit, location) };
            if let Some(hooks) = hooks {
                // The fiber is queued and has not run.
                // SAFETY: called once, as `JobHooks` says.
                unsafe { (hooks.started)(hooks.data, id) };
            }
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

/// What a group is told of its member sent as a job, with `data` (a count
/// of the group's node): `started(data, id)` on the worker that made the
/// fiber, right after (before it runs), and `on_exit(data)` at its end,
/// on its fiber, as for a spawned member; or, instead of both,
/// `never_ran(data, id)` once its result (cancelled) is in, when the job
/// is dropped unrun or its fiber could not be made, on whichever thread
/// that happens.
pub(crate) struct JobHooks {
    pub(crate) data: *const (),
    pub(crate) started: unsafe fn(*const (), FiberId),
    pub(crate) on_exit: unsafe fn(*const ()),
    pub(crate) never_ran: unsafe fn(*const (), FiberId),
}

// The hooks are called on other threads by contract (`Job::member`'s
// caller provides for it); `data` is theirs alone.
// SAFETY: as argued just above.
unsafe impl Send for JobHooks {}

/// A job's closure and its end of the packet until the fiber exists:
/// dropped unrun, the job reports that the fiber was cancelled.
struct Unstarted<F, T> {
    f: Option<F>,
    end: Option<FiberEnd<T>>,
    id: FiberId,
    hooks: Option<JobHooks>,
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
        if let Some(hooks) = self.hooks.take() {
            // SAFETY: the fiber was never made: called once, after the
            // result is in, as `JobHooks` says.
            unsafe { (hooks.never_ran)(hooks.data, self.id) };
        }
    }
}

impl<F, T> Drop for Unstarted<F, T> {
    fn drop(&mut self) {
        let id = self.id;
        self.fail(JoinError::cancelled(id, None));
    }
}
