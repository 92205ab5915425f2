//! [`RawSemaphore`]: a counting semaphore with a FIFO of waiters, without
//! permit guards. `Semaphore` (in `semaphore`) is its public face; `Mutex`
//! and `RwLock` stand on it too.
//!
//! ## How it works
//!
//! The number of free permits lives in one atomic word, together with a
//! `WAITERS` bit. When the bit is clear, acquiring and releasing are a
//! single compare-and-swap: no lock, no syscall. When someone has to wait,
//! it takes the waiter lock, sets the bit and queues itself; from then on
//! every release goes through the lock and hands its permits to the waiters
//! in order, the front one first — even a front waiter that needs more
//! permits than are free is given what there is, and nobody behind it may
//! overtake. That is what makes the semaphore (and the locks built on it)
//! fair: a writer waiting for a `RwLock` is not starved by a stream of
//! readers, and a fiber waiting for a `Mutex` is served before one that
//! comes later.
//!
//! # Invariant
//!
//! While `WAITERS` is set, the free count is zero (released permits went to
//! the waiters), and only a holder of the waiter lock changes the word.
//! `WAITERS` is set exactly while the list is non-empty.

use crate::atomic::{AtomicUsize, Ordering};

use crate::scheduler::wakeups::Wakeups;
use crate::sync::waiters::{Mutex, MutexGuard, Node, WaitList, Woken, lock, park_until_served};
use crate::timer::clock;

const WAITERS: usize = 1;
/// Permits are counted from bit 1 up.
const ONE: usize = 2;

/// The most permits a semaphore can hold (so that adding never overflows).
pub(crate) const MAX_PERMITS: usize = usize::MAX >> 3;

/// What a queued acquirer asked for and what it has been given so far.
struct Want {
    needed: usize,
    assigned: usize,
}

/// The semaphore without its public face (no permit guards).
pub(crate) struct RawSemaphore {
    /// Free permits × 2, plus `WAITERS`.
    state: AtomicUsize,
    waiters: Mutex<WaitList<Want>>,
}

/// A deadline that passed before the permits were given.
#[derive(Debug)]
pub(crate) struct TimedOut;

impl RawSemaphore {
    const_unless_loom! {
        pub(crate) fn new(permits: usize) -> RawSemaphore {
            assert!(
                permits <= MAX_PERMITS,
                "a semaphore cannot hold that many permits"
            );
            RawSemaphore {
                state: AtomicUsize::new(permits * ONE),
                waiters: Mutex::new(WaitList::new()),
            }
        }
    }

    pub(crate) fn available(&self) -> usize {
        self.state.load(Ordering::Acquire) / ONE
    }

    /// Takes `n` permits if they are free and nobody waits (waiters come first).
    #[inline]
    pub(crate) fn try_acquire(&self, n: usize) -> bool {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & WAITERS != 0 || state / ONE < n {
                return false;
            }
            match self.state.compare_exchange_weak(
                state,
                state - n * ONE,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    /// Takes `n` permits, waiting in line for them until `deadline` (ns);
    /// `what` names the wait in fiber dumps.
    #[inline]
    pub(crate) fn acquire(
        &self,
        n: usize,
        deadline: Option<u64>,
        what: &'static &'static str,
    ) -> Result<(), TimedOut> {
        if self.try_acquire(n) {
            return Ok(());
        }
        self.acquire_slow(n, deadline, what)
    }

    #[cold]
    fn acquire_slow(
        &self,
        n: usize,
        deadline: Option<u64>,
        what: &'static &'static str,
    ) -> Result<(), TimedOut> {
        assert!(n <= MAX_PERMITS, "cannot acquire that many permits");
        let guard = lock(&self.waiters);
        // With the lock held, the word changes only by fast-path CASes,
        // and only while WAITERS is clear.
        let mut state = self.state.load(Ordering::Acquire);
        let assigned = loop {
            if state & WAITERS != 0 {
                break 0; // no free permits (invariant): queue up
            }
            let free = state / ONE;
            let (next, result) = if free >= n {
                (state - n * ONE, None)
            } else {
                // Take what is free and wait, first in line, for the rest.
                (WAITERS, Some(free))
            };
            match self
                .state
                .compare_exchange(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => match result {
                    None => return Ok(()),
                    Some(free) => break free,
                },
                Err(now) => state = now,
            }
        };
        if deadline.is_some_and(|d| d <= clock::now_ns()) {
            // Already too late: give back what was taken.
            self.release_locked(guard, assigned);
            return Err(TimedOut);
        }
        let node = Node::new(Want {
            needed: n,
            assigned,
        });
        let woken = park_until_served(
            &self.waiters,
            guard,
            |list| list,
            &node,
            deadline,
            what,
            || {},
            |mut guard, served| {
                // Unwinding: return the permits, served or partly given.
                let given = if served {
                    n
                } else {
                    guard.payload(&node).assigned
                };
                self.release_locked(guard, given);
            },
        );
        let mut guard = match woken {
            Woken::Served | Woken::Locked(_, true) => return Ok(()),
            Woken::Locked(guard, false) => guard,
        };
        let given = guard.payload(&node).assigned;
        self.release_locked(guard, given);
        Err(TimedOut)
    }

    /// Returns `n` permits.
    #[inline]
    pub(crate) fn release(&self, n: usize) {
        let mut state = self.state.load(Ordering::Relaxed);
        while state & WAITERS == 0 {
            match self.state.compare_exchange_weak(
                state,
                state + n * ONE,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
        self.release_locked(lock(&self.waiters), n);
    }

    /// Hands `n` permits to the waiters in order, keeps the rest, and
    /// clears `WAITERS` when nobody is left; wakes the served after
    /// unlocking. Also called with `n == 0` after a waiter left, to keep the
    /// invariant (and let the next in line be served).
    #[cold]
    fn release_locked(&self, mut guard: MutexGuard<'_, WaitList<Want>>, n: usize) {
        let mut left = n;
        let mut wakeups = Wakeups::default();
        while let Some(front) = guard.front() {
            let give = left.min(front.needed - front.assigned);
            front.assigned += give;
            left -= give;
            if front.assigned < front.needed {
                break;
            }
            let ((), unparker) = guard.pop_front(|_| ()).expect("the front is there");
            wakeups.push(unparker);
        }
        if guard.is_empty() {
            // Clear WAITERS and keep the rest. A CAS, not a store: when
            // WAITERS was already clear (a waiter that took free permits
            // gave up), fast paths may be changing the word.
            let mut state = self.state.load(Ordering::Acquire);
            loop {
                let next = (state & !WAITERS) + left * ONE;
                match self.state.compare_exchange_weak(
                    state,
                    next,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    Err(now) => state = now,
                }
            }
        } else {
            debug_assert_eq!(left, 0, "permits left over while someone waits");
        }
        drop(guard);
        wakeups.wake();
    }
}
