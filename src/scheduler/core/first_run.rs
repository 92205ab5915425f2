//! A deferred fiber's first run (see `first_frame`): its first frame built
//! by the switch that first runs it, and the top pages of the stacks of the
//! deferred fibers queued behind it faulted in together, just before they
//! run.

use super::*;

/// The most stacks [`Core::populate_ahead`] faults in at once: one
/// `process_madvise` call's worth.
const POPULATE_AHEAD: usize = 512;

/// The fewest stacks [`Core::populate_ahead`] calls the kernel for.
const POPULATE_AT_LEAST: usize = 16;

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
        // The frame and the `Meta` are written before the record says the
        // fiber has a frame: a dump that reads this runtime while a signal
        // holds its thread here walks the stack from a real `sp`
        // (`debugger::held`).
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        rec.sp = sp;
    }

    /// Faults in, in one call, the top page of `to`'s stack and of the
    /// stacks of the fibers right behind it in the run queue that have not
    /// run either ([`POPULATE_AHEAD`] at most): deferred fibers come in
    /// bursts and run in a row, each writing its first frame there, so each
    /// writes a page that was just cleared and whose translation is fresh.
    /// Populated at spawn instead (a chunk of stacks at a time), a burst's
    /// pages had left the caches by the time their fibers ran (a million
    /// spawns take 0.84x the time this way: see the README).
    ///
    /// Each fiber is looked at once: the run of deferred fibers found is
    /// counted in `populated_ahead` whether or not it was populated, and
    /// the look stops at the first fiber that has run. A run shorter than
    /// [`POPULATE_AT_LEAST`] is not a burst: a fiber deferred behind a long
    /// queue of woken ones keeps its stack as it is (reused from the pool,
    /// most likely resident) rather than pay a syscall of its own.
    #[cold]
    #[inline(never)]
    fn populate_ahead(l: &mut Local, to: Key) {
        if !stack::populates() {
            return;
        }
        let mut stacks = Vec::with_capacity(POPULATE_AHEAD);
        stacks.extend(l.fibers[to].stack.as_ref());
        let mut i = 0;
        while stacks.len() < POPULATE_AHEAD
            && let Some(key) = l.run_queue.nth(i)
            && let Some(rec) = l.fibers.get(key)
            && first_frame::deferred(rec.sp).is_some()
        {
            i += 1;
            stacks.extend(rec.stack.as_ref());
        }
        if stacks.len() >= POPULATE_AT_LEAST {
            stack::populate_tops(&stacks);
        }
        l.populated_ahead = i as u32;
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;
    use crate::scheduler::context;
    use crate::stack::tests::{kernel_populates, resident};

    /// Spawns `n` fibers in a row on a thread and runtime of their own (the
    /// stack pool is per thread, and a fresh stack has no page resident
    /// until something writes or populates it). Returns the spawn index of
    /// the first fiber whose start was deferred, how many were, and, for
    /// each fiber at `first + offset` (`offsets`, -1 for the one before it),
    /// how many of the deferred fibers' top pages were resident when it ran.
    fn burst(n: usize, offsets: &'static [isize]) -> (usize, usize, Vec<usize>) {
        std::thread::spawn(move || {
            let rt = crate::Runtime::new().unwrap();
            rt.block_on(|| {
                let tops: Rc<RefCell<Vec<*mut u8>>> = Rc::default();
                let probes: Rc<RefCell<Vec<usize>>> = Rc::default();
                let seen: Rc<RefCell<Vec<usize>>> = Rc::default();
                for i in 0..n {
                    let (tops, probes, seen) = (tops.clone(), probes.clone(), seen.clone());
                    crate::fiber::spawn(move || {
                        if probes.borrow().contains(&i) {
                            let tops = tops.borrow();
                            let count = tops.iter().filter(|&&top| resident(top.wrapping_sub(1)));
                            seen.borrow_mut().push(count.count());
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
                let first = first.expect("a burst defers some starts");
                assert_eq!(
                    tops.borrow()
                        .iter()
                        .filter(|&&t| resident(t.wrapping_sub(1)))
                        .count(),
                    0,
                    "a deferred fiber's stack is not touched at spawn"
                );
                *probes.borrow_mut() = offsets
                    .iter()
                    .map(|&o| first.checked_add_signed(o).unwrap())
                    .collect();
                crate::yield_now(); // every fiber runs once, in order
                let deferred = tops.borrow().len();
                let seen = seen.borrow().clone();
                (first, deferred, seen)
            })
        })
        .join()
        .unwrap()
    }

    #[test]
    fn a_burst_s_stacks_are_faulted_in_a_batch_at_a_time_as_its_fibers_start() {
        let (first, deferred, seen) = burst(1000, &[-1, 0, POPULATE_AHEAD as isize]);
        assert!(first > 0 && deferred > POPULATE_AHEAD, "{first} {deferred}");
        let expect = |batch, one_by_one| {
            if kernel_populates() {
                batch
            } else {
                one_by_one
            }
        };
        assert_eq!(
            seen,
            [
                0,
                expect(POPULATE_AHEAD, 1),
                expect(deferred, POPULATE_AHEAD + 1)
            ],
            "the last fiber not deferred sees none of the pages; the first \
             deferred one, the first batch; the first of the next batch, all"
        );
    }

    #[test]
    fn a_few_deferred_fibers_are_left_to_fault_their_own_pages() {
        // Fewer than POPULATE_AT_LEAST in a row: no call to the kernel.
        let (first, deferred, seen) = burst(260, &[0, 3]);
        assert!(
            first > 0 && deferred < POPULATE_AT_LEAST,
            "{first} {deferred}"
        );
        assert_eq!(seen, [1, 4], "each page comes in as its fiber first runs");
    }
}
