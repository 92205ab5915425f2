//! Waking a parked context: the [`Unparker`] a wait list keeps for each
//! waiter (a fiber of any runtime, woken from any thread, or a thread, or
//! an async task), and its reference-count-free form [`RawUnparker`].
//! `park.rs` is the other half: the parks these end.

use crate::scheduler::os_thread::{self, Thread};
use std::ptr;
use std::sync::Arc;

use crate::reactor::token::WakeToken;
use crate::scheduler::context;
use crate::scheduler::core::Core;
use crate::scheduler::core::record::Wake;
use crate::scheduler::shared::{Remote, Shared};

/// The unparker of a context's next park, kept by a wait list without a
/// reference count for a fiber: a waker turns it into an [`Unparker`] with
/// [`RawUnparker::pinned`] while the waiter cannot end its park (a channel's
/// waiter it has claimed). A fiber woken from its own runtime then costs no
/// reference count at all (between fibers of one thread, two atomic
/// operations a wait: a tenth of a channel's ping-pong).
#[derive(Clone)]
pub(crate) enum RawUnparker {
    Fiber(LocalUnparker),
    Other(Unparker),
}

impl RawUnparker {
    /// For the calling context's next park.
    #[inline]
    pub(crate) fn current() -> RawUnparker {
        match context::current() {
            Some(core) => RawUnparker::Fiber(LocalUnparker {
                runtime: Arc::as_ptr(&core.shared),
                token: core.current_token(),
            }),
            None => RawUnparker::Other(Unparker::Thread(os_thread::current())),
        }
    }

    /// The unparker, made while its park is pinned.
    ///
    /// # Safety
    ///
    /// The parked fiber cannot have finished its park when this is called
    /// (its waker claimed it, and it waits for the claim to end). Its
    /// runtime's `Shared` is then alive: a runtime outlives its parked
    /// fibers, or leaks its `Shared` with them (`Core::abandon`).
    #[inline]
    pub(crate) unsafe fn pinned(&self) -> Unparker {
        match self {
            RawUnparker::Other(unparker) => unparker.clone(),
            RawUnparker::Fiber(local) => match context::current() {
                Some(core) if ptr::eq(Arc::as_ptr(&core.shared), local.runtime) => {
                    Unparker::Local(*local)
                }
                _ => {
                    // SAFETY: `runtime` came from `Arc::as_ptr` of a
                    // `Shared` that is alive (the caller's contract); one
                    // more count, owned by the unparker made here.
                    let shared = unsafe {
                        Arc::increment_strong_count(local.runtime);
                        Arc::from_raw(local.runtime)
                    };
                    Unparker::Fiber(FiberUnparker {
                        shared,
                        token: local.token,
                    })
                }
            },
        }
    }
}

/// Wakes one parked context: a fiber (of any runtime, from any thread) or a
/// thread. `Send + Sync`; waking a park that has already ended does nothing.
#[derive(Clone)]
pub(crate) enum Unparker {
    Fiber(FiberUnparker),
    /// A fiber woken only from its own runtime (see [`Unparker::local`]):
    /// no reference count to take.
    Local(LocalUnparker),
    Thread(Thread),
    /// An async task, woken through its `Waker`.
    Waker(std::task::Waker),
}

/// A wake token plus the identity (not ownership) of its runtime.
#[derive(Clone, Copy)]
pub(crate) struct LocalUnparker {
    runtime: *const Shared,
    token: WakeToken,
}

// SAFETY: `runtime` is never dereferenced, only compared with the runtime
// entered on the thread that unparks; the token is plain data.
unsafe impl Send for LocalUnparker {}
// SAFETY: as above.
unsafe impl Sync for LocalUnparker {}

impl LocalUnparker {
    /// Wakes the fiber if `core` is its runtime (which runs on the calling
    /// thread); returns whether it is.
    #[inline]
    pub(crate) fn unpark_in(self, core: &Core) -> bool {
        if !ptr::eq(Arc::as_ptr(&core.shared), self.runtime) {
            return false;
        }
        core.wake(self.token, Wake::Unparked);
        true
    }
}

#[derive(Clone)]
pub(crate) struct FiberUnparker {
    shared: Arc<Shared>,
    token: WakeToken,
}

impl Unparker {
    /// The unparker of the calling context's next park.
    pub(crate) fn current() -> Unparker {
        match context::current() {
            Some(core) => Unparker::Fiber(FiberUnparker {
                shared: core.shared.clone(),
                token: core.current_token(),
            }),
            None => Unparker::Thread(os_thread::current()),
        }
    }

    /// The unparker of the current fiber's next park, for a waker that
    /// runs inside the same runtime (a fiber of it completing, say). Cheaper
    /// than [`Unparker::current`]: nothing is reference-counted.
    #[inline]
    pub(crate) fn local(core: &Core) -> Unparker {
        Unparker::Local(LocalUnparker {
            runtime: Arc::as_ptr(&core.shared),
            token: core.current_token(),
        })
    }

    pub(crate) fn unpark(&self) {
        match self {
            Unparker::Thread(thread) => thread.unpark(),
            Unparker::Waker(waker) => waker.wake_by_ref(),
            Unparker::Local(l) => {
                let woken = context::current().is_some_and(|core| l.unpark_in(core));
                debug_assert!(woken, "a local unparker used outside its runtime");
            }
            Unparker::Fiber(f) => match context::current() {
                // On the fiber's own thread, inside its runtime: no lock, no syscall.
                Some(core) if Arc::ptr_eq(&core.shared, &f.shared) => {
                    core.wake(f.token, Wake::Unparked);
                }
                _ => f.shared.send(Remote::Unpark(f.token)),
            },
        }
    }
}
