//! The end of a runtime: its fibers cancelled and run to their end, or,
//! while the thread destroys its thread-locals, leaked.

use super::*;

impl Core {
    /// Cancels every fiber and runs them until all have finished.
    pub(crate) fn shutdown(&self) {
        // SAFETY: on the runtime's thread; short borrow, ended before the
        // cancellations (traced: a subscriber's code).
        let l = unsafe { self.local() };
        l.closing = true;
        let all: Vec<(Key, FiberId)> = l
            .fibers
            .iter()
            .filter(|(key, _)| *key != ROOT)
            .map(|(key, rec)| (key, rec.id))
            .collect();
        for (key, id) in all {
            self.cancel(key, id);
        }
        self.run_root(Until::NoFibers);
    }

    /// Leaks every fiber instead of finishing it: for a runtime dropped
    /// while its thread destroys its thread-locals, whose parked fibers may
    /// borrow destroyed ones (see `scheduler::thread_exit`). Nothing of a
    /// fiber runs again or is dropped: its stack stays mapped (a parked
    /// fiber's frames may be linked into wait lists that other threads
    /// still walk), and its span is forgotten with it. Its `JoinHandle`
    /// never completes.
    pub(crate) fn abandon(&self) {
        // SAFETY: on the runtime's thread; no user code runs in here.
        let l = unsafe { self.local() };
        l.closing = true;
        let keys: Vec<Key> = l
            .fibers
            .iter()
            .filter(|(key, _)| *key != ROOT)
            .map(|(key, _)| key)
            .collect();
        for key in keys {
            std::mem::forget(l.fibers[key].span.take());
            std::mem::forget(l.fibers.vacate(key));
        }
        l.live = 0;
        while l.run_queue.pop_front().is_some() {}
        // A leaked fiber may still be in a channel's wait list, and a
        // waker on another thread reaches its runtime through a raw
        // pointer (`RawUnparker`): the runtime's `Shared` is leaked too.
        std::mem::forget(self.shared.clone());
    }
}
