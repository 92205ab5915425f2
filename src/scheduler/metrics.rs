//! [`WorkerMetrics`]: what a worker's figures say, as the worker pool
//! publishes them and `Runtime::metrics` hands them out.

/// What a worker's figures say; see [`Runtime::metrics`](crate::Runtime::metrics).
///
/// A worker publishes its figures every time it polls for I/O (at least
/// once every 128 fibers it runs — its budget between two polls, as
/// tokio's cooperative budget — and before it sleeps), so they may lag by
/// that much.
///
/// ```
/// let rt = fibra::Runtime::builder().workers(2).build()?;
/// let metrics = rt.metrics();
/// assert_eq!(metrics.len(), 2);
/// assert_eq!(metrics[0].worker, 0);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerMetrics {
    /// The worker's index (`fibra-worker-N`); 0 for a current-thread runtime.
    pub worker: usize,
    /// Fibers started on this worker that have not finished.
    pub alive: usize,
    /// Of those, the ones ready to run.
    pub ready: usize,
    /// Of those, the ones parked (waiting for I/O, a timer, a lock...).
    pub parked: usize,
    /// Fibers sent to this worker that have not started yet.
    pub queued: usize,
    /// Jobs this worker took from other workers' inboxes, in all.
    pub stolen: u64,
}

impl WorkerMetrics {
    /// A current-thread runtime's figures: its one worker, `alive` fibers
    /// of which `ready` are ready, nothing queued or stolen.
    pub(crate) fn current_thread(alive: usize, ready: usize) -> WorkerMetrics {
        WorkerMetrics {
            worker: 0,
            alive,
            ready,
            parked: alive - ready,
            queued: 0,
            stolen: 0,
        }
    }
}
