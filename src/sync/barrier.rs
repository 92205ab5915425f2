//! [`Barrier`]: std's barrier, for fibers and threads alike.

use crate::sync::waiters::Mutex as InnerLock;
use std::fmt;

use crate::scheduler::wakeups::Wakeups;
use crate::sync::waiters::{Node, WaitList, lock, park_until_served};

/// Lets a fixed number of parties wait until all of them have arrived, then
/// releases them together; reusable, like std's. Waiting parks the fiber
/// (or blocks the thread).
///
/// A waiter that is cancelled (or times out under `fibra::timeout`) before
/// the barrier opens leaves it: the barrier then waits for one more
/// arrival instead of opening one party short.
///
/// ```
/// use std::sync::Arc;
/// use fibra::sync::Barrier;
///
/// fibra::run(|| {
///     let barrier = Arc::new(Barrier::new(3));
///     let fibers: Vec<_> = (0..3)
///         .map(|_| {
///             let barrier = barrier.clone();
///             fibra::spawn(move || barrier.wait().is_leader())
///         })
///         .collect();
///     let leaders = fibers.into_iter().map(|f| f.join().unwrap());
///     assert_eq!(leaders.filter(|&leader| leader).count(), 1);
/// });
/// ```
pub struct Barrier {
    parties: usize,
    state: InnerLock<State>,
}

struct State {
    arrived: usize,
    waiters: WaitList<()>,
}

/// What [`Barrier::wait`] tells each party.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierWaitResult(bool);

impl BarrierWaitResult {
    /// Whether this party was the one to open the barrier (exactly one per
    /// round is).
    ///
    /// ```
    /// assert!(fibra::sync::Barrier::new(1).wait().is_leader());
    /// ```
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl Barrier {
    /// A barrier for `parties` waiters.
    ///
    /// # Panics
    ///
    /// If `parties` is zero: a barrier nobody can open is a bug (std quietly
    /// treats it as one).
    ///
    /// ```should_panic
    /// let b = fibra::sync::Barrier::new(0);
    /// ```
    pub fn new(parties: usize) -> Barrier {
        assert!(
            parties > 0,
            "Barrier::new(0): a barrier needs at least one party to open it"
        );
        Barrier {
            parties,
            state: InnerLock::new(State {
                arrived: 0,
                waiters: WaitList::new(),
            }),
        }
    }

    /// Waits until all parties have called `wait`; the last to arrive opens
    /// the barrier for everyone (and is the leader).
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let b = Arc::new(fibra::sync::Barrier::new(2));
    /// let b2 = b.clone();
    /// let t = std::thread::spawn(move || b2.wait().is_leader());
    /// let me = b.wait().is_leader();
    /// assert!(me != t.join().unwrap()); // one leader
    /// ```
    pub fn wait(&self) -> BarrierWaitResult {
        let mut state = lock(&self.state);
        state.arrived += 1;
        if state.arrived == self.parties {
            state.arrived = 0;
            let mut wakeups = Wakeups::default();
            state.waiters.take_all_into(&mut wakeups, |_| ());
            drop(state);
            wakeups.wake();
            return BarrierWaitResult(true);
        }
        let node = Node::new(());
        let served = park_until_served(
            &self.state,
            state,
            |s| &mut s.waiters,
            &node,
            None,
            &"Barrier::wait",
            || {},
            |mut state, served| {
                if !served {
                    state.arrived -= 1; // leaving before it opened
                }
            },
        )
        .served();
        debug_assert!(served, "a wait without deadline ended unserved");
        BarrierWaitResult(false)
    }
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier")
            .field("parties", &self.parties)
            .finish_non_exhaustive()
    }
}
