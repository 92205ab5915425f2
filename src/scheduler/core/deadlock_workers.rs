//! Deadlocks of a runtime of several workers told (`deadlock.rs` tells a
//! current-thread runtime's). A worker's fibers may wait on a lock that a
//! fiber of another worker holds, so no worker can tell alone: each one
//! that waits for events with all its fibers parked on fibra's primitives,
//! no timer armed and no fd registered publishes that it is *quiet*, and
//! the last to do so keeps the watch: when every worker has stood still so
//! for `stall_warning` × 10, with no job queued and no wake-up on its way
//! to any of them, it emits the WARN (target `fibra::deadlock`) with every
//! worker's dump and stacks. How the look avoids a false report (a fiber
//! that moves, a wake-up in flight) is `pool/quiet.rs`.
//!
//! Off the hot paths: a worker that goes idle with an fd registered (a
//! server) pays the tests it paid before (see `parked_on_primitives`); a
//! wake-up pays nothing; a worker that takes a message or a job while it is
//! published quiet clears its record (a load and a branch otherwise). Fibers
//! of two workers that hand work to each other through fibra's channels,
//! with no fd, pay at each hand-over the pass over the records, a clock
//! read, a few stores to the worker's own line, a fence and a load of the
//! other worker's message flag (`pool/quiet.rs`).

use super::*;
use crate::scheduler::fiber_info::ANSWER_WITHIN;
use crate::scheduler::pool::Look;

impl Core {
    /// A worker's wait when it found no work: until an event, as
    /// [`Core::poll`] without a timeout, unless the runtime may be
    /// deadlocked (see the module docs): then its record is published while
    /// it waits, and it keeps the watch if it is the last to go quiet.
    #[inline(never)]
    pub(super) fn wait_quiet(&self, worker: &WorkerLink<Job>) {
        let quiet = self
            .deadlock_after()
            .and_then(|after| Some((after, self.parked_on_primitives()?)));
        let Some((after, parked)) = quiet else {
            self.poll(None);
            return;
        };
        // SAFETY: on the runtime's thread; short borrow.
        let seq = unsafe { self.local() }.park_seq;
        loop {
            // Published again after a message that changed nothing (a
            // dump request, a stale wake-up) cleared it.
            worker.enter_quiet(seq, parked);
            let timeout = match worker.look_quiet(after) {
                Look::NotAll => None,
                Look::Wait(ns) => Some(std::time::Duration::from_nanos(ns)),
                Look::Deadlocked {
                    waited_ns,
                    fibers,
                    fingerprint,
                } => {
                    if worker.tell_deadlock(fingerprint) {
                        let waited = std::time::Duration::from_nanos(waited_ns);
                        self.warn_deadlock_of_workers(worker, waited, fibers);
                    }
                    None
                }
            };
            self.poll(timeout);
            // SAFETY: on the runtime's thread; short borrow.
            let l = unsafe { self.local() };
            if l.park_seq != seq
                || !l.run_queue.is_empty()
                || !l.idle_queue.is_empty()
                || worker.stopping()
            {
                break; // something happened here
            }
        }
        worker.leave_quiet();
    }

    /// Emits the deadlock WARN of a runtime of workers, with every
    /// worker's dump: its own section, and the others' asked for as
    /// `Runtime::dump` asks (they wait in `epoll_wait`, quiet, and answer
    /// at once). Published idle meanwhile, as `warn_deadlock` explains:
    /// this thread waits for the answers and names the stacks.
    #[cold]
    #[inline(never)]
    fn warn_deadlock_of_workers(
        &self,
        worker: &WorkerLink<Job>,
        waited: std::time::Duration,
        fibers: u64,
    ) {
        if !self.deadlock_heard() {
            return; // no dump asked of the others, walked or named
        }
        self.shared.watch.publish_idle();
        let siblings = worker.siblings();
        let workers = siblings.len() + 1;
        let mut sections: Vec<Option<Section>> = vec![None; workers];
        sections[worker.index()] = Some(self.dump_section(false));
        let (tx, rx) = std::sync::mpsc::channel();
        for (i, shared) in &siblings {
            let (tx, i) = (tx.clone(), *i);
            shared.send(Remote::Dump(Box::new(move |section| {
                let _ = tx.send((i, section));
            })));
        }
        drop(tx);
        let deadline = std::time::Instant::now() + ANSWER_WITHIN;
        let mut waiting = siblings.len();
        while waiting > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok((i, section)) => {
                    sections[i] = Some(section);
                    waiting -= 1;
                }
                Err(_) => break,
            }
        }
        let sections = sections
            .into_iter()
            .enumerate()
            .map(|(i, section)| section.unwrap_or_else(|| unanswered(&siblings, i)))
            .collect();
        self.tell_deadlock(sections, Some(workers), fibers, waited);
        self.publish_root_running();
    }
}

/// The section of worker `i`, which did not answer the deadlock's dump in
/// time.
fn unanswered(siblings: &[(usize, Arc<Shared>)], i: usize) -> Section {
    let thread = siblings.iter().find(|(at, _)| *at == i).map_or_else(
        || format!("fibra-worker-{i}"),
        |(_, s)| s.thread_name.clone(),
    );
    Section {
        thread,
        fibers: None,
        stalled: None,
        stalled_stack: None,
        held_note: None,
        busy: None,
        stacks: Vec::new(),
    }
}
