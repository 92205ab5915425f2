//! Where a fiber lives, for its handle's `cancel`: a slot of a runtime
//! ([`FiberRef::At`]), or, for a job sent to a runtime of workers, a
//! [`Placement`] that the starting worker fills in, so `cancel` works at
//! every stage. A leaf: the packet keeps a `FiberRef`, the job fills the
//! placement, and neither needs the other.

use std::sync::{Arc, Mutex};

use crate::reactor::token::Key;
use crate::scheduler::context;
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::registry::{self, RuntimeId};
use crate::scheduler::shared::Remote;

/// Where a fiber lives, to cancel it.
#[derive(Clone)]
pub(crate) enum FiberRef {
    /// In slot `key` of runtime `runtime`.
    At { runtime: RuntimeId, key: Key },
    /// Sent to a runtime of workers, where it may not have started yet.
    Queued(Arc<Placement>),
}

impl FiberRef {
    /// Cancels fiber `id`, wherever it is.
    pub(crate) fn cancel(&self, id: FiberId) {
        match self {
            FiberRef::At { runtime, key } => cancel_fiber(*runtime, *key, id),
            FiberRef::Queued(placement) => placement.cancel(id),
        }
    }
}

/// Cancels the fiber `id` in slot `key` of runtime `runtime`: directly on
/// its own thread inside its runtime, by message otherwise; nothing if the
/// runtime is gone (its fibers are all finished then).
pub(crate) fn cancel_fiber(runtime: RuntimeId, key: Key, id: FiberId) {
    match context::current() {
        Some(core) if core.id == runtime => core.cancel(key, id),
        _ => {
            if let Some(shared) = registry::get(runtime) {
                shared.send(Remote::Cancel(key, id));
            }
        }
    }
}

/// Where a job's fiber went, for its handle's `cancel`.
pub(crate) struct Placement {
    place: Mutex<Place>,
}

enum Place {
    Queued,
    /// Cancelled while queued: it is cancelled as soon as it starts.
    Cancelled,
    At(RuntimeId, Key),
}

impl Placement {
    /// The placement of a job not started yet.
    pub(crate) fn queued() -> Placement {
        Placement {
            place: Mutex::new(Place::Queued),
        }
    }

    /// Records where the fiber started; returns whether it was cancelled
    /// before (the caller cancels it now).
    pub(crate) fn place(&self, runtime: RuntimeId, key: Key) -> bool {
        let mut place = self.place.lock().unwrap_or_else(|e| e.into_inner());
        let cancelled = matches!(*place, Place::Cancelled);
        *place = Place::At(runtime, key);
        cancelled
    }

    /// Cancels fiber `id`: now if it has started, when it starts otherwise.
    pub(crate) fn cancel(&self, id: FiberId) {
        let at = {
            let mut place = self.place.lock().unwrap_or_else(|e| e.into_inner());
            match *place {
                Place::Queued => {
                    *place = Place::Cancelled;
                    None
                }
                Place::Cancelled => None,
                Place::At(runtime, key) => Some((runtime, key)),
            }
        };
        if let Some((runtime, key)) = at {
            cancel_fiber(runtime, key, id);
        }
    }
}
