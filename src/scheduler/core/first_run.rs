//! A deferred fiber's first run (see `first_frame`): its first frame built
//! by the switch that first runs it, and the top pages of the stacks of the
//! deferred fibers queued behind it faulted in together, just before they
//! run.

use super::*;

/// The most stacks [`Core::populate_ahead`] faults in at once: one
/// `process_madvise` call's worth.
const POPULATE_AHEAD: usize = 512;

impl Core {
    /// `to` has never run, and its record's `sp` stands for its deferred
    /// start (see `first_frame`): builds its first frame on its stack, which
    /// is its own and untouched, and stores the real `sp` in the record, so
    /// that from its first switch in on nothing reads the start's box
    /// through it (which may be freed as soon as the fiber runs, or at its
    /// end, maybe before it ever switches out). No user code runs in here.
    #[cold]
    #[inline(never)]
    pub(super) fn build_first_frame(l: &mut Local, to: Key) {
        if l.populated_ahead > 0 {
            l.populated_ahead -= 1;
        } else {
            Self::populate_ahead(l, to);
        }
        let rec = &mut l.fibers[to];
        let head = first_frame::deferred(rec.sp).expect("fibra: no deferred start");
        // A record with a deferred `sp` always has a stack: `add_fiber`
        // took one.
        let stack = rec
            .stack
            .as_ref()
            .expect("fibra: a deferred start without a stack");
        // SAFETY: as argued in the doc comment; `head` is the live box
        // `fiber::entry` made (freed only by the fiber, which has not run).
        let sp = unsafe { first_frame::build(stack, rec.id, rec.name.as_deref(), head) };
        rec.sp = sp;
    }

    /// Faults in, in one call, the top page of `to`'s stack and of the
    /// stacks of the next [`POPULATE_AHEAD`] - 1 fibers in the run queue
    /// that have not run either: deferred fibers come in bursts and run in
    /// a row, each writing its first frame there, so each writes a page
    /// that was just cleared and whose translation is fresh. Populated at
    /// spawn instead (a chunk of stacks at a time), a burst's pages had
    /// left the caches by the time their fibers ran (a million spawns take
    /// 0.84x the time this way: see the README).
    /// What the next batch finds already resident (a fiber that did not
    /// run in queue order, a stack reused from the pool) costs the kernel
    /// a walk, not a page.
    #[cold]
    #[inline(never)]
    fn populate_ahead(l: &mut Local, to: Key) {
        if !stack::populates() {
            return;
        }
        let mut stacks = Vec::with_capacity(POPULATE_AHEAD);
        stacks.extend(l.fibers[to].stack.as_ref());
        let mut i = 0;
        // The queue may hold fibers that have run between the deferred
        // ones: look at twice the batch at most.
        while stacks.len() < POPULATE_AHEAD
            && i < 2 * POPULATE_AHEAD
            && let Some(key) = l.run_queue.nth(i)
        {
            i += 1;
            if let Some(rec) = l.fibers.get(key)
                && first_frame::deferred(rec.sp).is_some()
                && key != to
            {
                stacks.extend(rec.stack.as_ref());
            }
        }
        stack::populate_tops(&stacks);
        l.populated_ahead = (stacks.len() as u32).saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;
    use crate::scheduler::context;
    use crate::stack::tests::{kernel_populates, resident};

    /// What the probed fibers saw when they ran: (spawn index, how many of
    /// the deferred fibers' top pages were resident).
    type Seen = Rc<RefCell<Vec<(usize, usize)>>>;

    #[test]
    fn a_burst_s_stacks_are_faulted_in_a_batch_at_a_time_as_its_fibers_start() {
        // On a thread of its own: the stack pool is per thread, and fresh
        // stacks have no page resident until something writes or populates.
        std::thread::spawn(|| {
            const N: usize = 1000;
            let rt = crate::Runtime::new().unwrap();
            rt.block_on(|| {
                let tops: Rc<RefCell<Vec<*mut u8>>> = Rc::default();
                let probes: Rc<RefCell<Vec<usize>>> = Rc::default();
                let seen: Seen = Rc::default();
                for i in 0..N {
                    let (tops, probes, seen) = (tops.clone(), probes.clone(), seen.clone());
                    crate::fiber::spawn(move || {
                        if probes.borrow().contains(&i) {
                            let tops = tops.borrow();
                            let count = tops.iter().filter(|&&top| resident(top.wrapping_sub(1)));
                            seen.borrow_mut().push((i, count.count()));
                        }
                    });
                }
                // The run queue holds the new fibers in spawn order; those
                // spawned behind many others have their start deferred.
                let core = context::current().unwrap();
                // SAFETY: on the runtime's thread; the borrow ends here.
                let l = unsafe { core.local() };
                let mut first = None;
                for at in 0..l.run_queue.len() {
                    let rec = &l.fibers[l.run_queue.nth(at).unwrap()];
                    if first_frame::deferred(rec.sp).is_some() {
                        first.get_or_insert(at);
                        tops.borrow_mut().push(rec.stack.as_ref().unwrap().top());
                    }
                }
                let first = first.expect("a burst of 1000 defers some starts");
                let deferred = tops.borrow().len();
                assert!(first > 0 && deferred > POPULATE_AHEAD, "{first} {deferred}");
                assert_eq!(
                    tops.borrow()
                        .iter()
                        .filter(|&&t| resident(t.wrapping_sub(1)))
                        .count(),
                    0,
                    "a deferred fiber's stack is not touched at spawn"
                );
                *probes.borrow_mut() = vec![first - 1, first, first + POPULATE_AHEAD];
                crate::yield_now(); // every fiber runs once, in order
                let batched = kernel_populates();
                let expect = |batch, one_by_one| if batched { batch } else { one_by_one };
                assert_eq!(
                    *seen.borrow(),
                    [
                        (first - 1, 0),
                        (first, expect(POPULATE_AHEAD, 1)),
                        (first + POPULATE_AHEAD, expect(deferred, POPULATE_AHEAD + 1)),
                    ],
                    "the last fiber not deferred sees none of the pages; the first \
                     deferred one, the first batch; the first of the next batch, all"
                );
            });
        })
        .join()
        .unwrap();
    }
}
