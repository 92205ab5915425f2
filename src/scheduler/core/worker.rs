//! A worker's side of the pool (see `scheduler/pool.rs`): the scheduler of a
//! runtime of several workers starts the jobs it takes from its inbox,
//! steals from busy workers when it has nothing to run, and sleeps when it
//! finds nothing, without losing a wake-up.

use super::*;
use crate::scheduler::pool::STEAL_AFTER;

impl Core {
    /// Starts a batch of jobs from the worker's own inbox; returns whether
    /// there were any. Called at every poll.
    pub(super) fn start_own(&self, worker: &WorkerLink<Job>) -> bool {
        let mut jobs = Vec::new();
        worker.take_own(&mut jobs);
        self.start_all(jobs)
    }

    /// Starts jobs another worker has not started yet. `Err(())`: none
    /// taken, but some may be soon.
    fn steal(&self, worker: &WorkerLink<Job>) -> Result<bool, ()> {
        let mut jobs = Vec::new();
        worker.steal(&mut jobs)?;
        Ok(self.start_all(jobs))
    }

    fn start_all(&self, jobs: Vec<Job>) -> bool {
        let any = !jobs.is_empty();
        for job in jobs {
            job.start(self);
        }
        any
    }

    /// Called when no fiber of this worker is ready: finds jobs, or sleeps
    /// until something happens (see `scheduler/pool.rs`).
    pub(super) fn wait_for_work(&self, worker: &WorkerLink<Job>, closing: bool) {
        if closing {
            self.poll(None); // shutting down: no new fibers
            return;
        }
        if self.start_own(worker) || self.steal(worker) == Ok(true) {
            return;
        }
        worker.go_idle();
        let stolen = self.steal(worker);
        if self.start_own(worker) || stolen == Ok(true) || worker.stopping() {
            worker.run();
            return;
        }
        let (alive, ready) = self.figures();
        worker.publish(alive, ready); // as they stay while it sleeps
        // Jobs elsewhere that are not takable yet: look again then.
        self.poll(stolen.err().map(|()| STEAL_AFTER));
        worker.run();
    }
}
