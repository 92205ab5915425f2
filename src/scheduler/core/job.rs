//! A [`Job`]: a fiber that has not started yet, as a runtime of workers
//! keeps it: a `Send` closure that creates the fiber on whichever worker
//! starts it. The pool (`scheduler/pool.rs`) moves jobs between threads, and
//! a worker's scheduler starts them (`core/worker.rs`); what a job holds
//! (the fiber's closure and its join handle's end) is made in
//! `fiber::queued`, which fills in `Job::new`.

use super::Core;

/// A fiber that has not started: where it goes, it is created and queued.
pub(crate) struct Job {
    /// Starts the fiber on the worker given. Dropped unrun (the runtime is
    /// shutting down), it completes the join handle as cancelled.
    start: Box<dyn FnOnce(&Core) + Send + 'static>,
}

impl Job {
    /// A job that runs `start` on the worker that takes it.
    pub(crate) fn from_start(start: Box<dyn FnOnce(&Core) + Send + 'static>) -> Job {
        Job { start }
    }

    /// Creates the fiber on `core` (the worker running this), queued to run.
    pub(crate) fn start(self, core: &Core) {
        (self.start)(core)
    }
}
