//! A worker's side of the pool (see `scheduler/pool.rs`): the scheduler of a
//! runtime of several workers starts the jobs it takes from its inbox,
//! steals from busy workers when it has nothing to run, and sleeps when it
//! finds nothing, without losing a wake-up.

use super::*;
use crate::scheduler::pool::STEAL_AFTER;

impl Core {
    /// The pool of the runtime of workers this core is a worker of;
    /// `None` for a current-thread runtime.
    pub(crate) fn pool(&self) -> Option<&Arc<crate::scheduler::pool::Pool<Job>>> {
        self.worker.as_ref().map(WorkerLink::pool)
    }

    /// Starts a batch of jobs from the worker's own inbox; returns whether
    /// there were any. Called at every poll.
    ///
    /// The looks that find nothing, at every poll and three times each
    /// time the worker goes idle (at one connection: every round trip),
    /// are a few loads and a store inline; starting jobs is out of line.
    #[inline(always)]
    pub(super) fn start_own(&self, worker: &WorkerLink<Job>) -> bool {
        match worker.take_own() {
            None => false,
            Some(jobs) => self.start_all(jobs),
        }
    }

    /// Starts jobs another worker has not started yet. `Err(())`: none
    /// taken, but some may be soon.
    #[inline(always)]
    fn steal(&self, worker: &WorkerLink<Job>) -> Result<bool, ()> {
        if !worker.others_have_stealable() {
            return Ok(false); // (inline: the usual answer)
        }
        match worker.steal()? {
            None => Ok(false),
            Some(jobs) => Ok(self.start_all(jobs)),
        }
    }

    #[inline(never)]
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
        match stolen {
            // Jobs elsewhere that are not takable yet: look again then.
            Err(()) => self.poll(Some(STEAL_AFTER)),
            // Until an event, unless the runtime may be deadlocked (see
            // `deadlock_workers.rs`).
            Ok(_) => self.wait_quiet(worker),
        }
        worker.run();
    }
}
