//! [`WaitGroup`]: wait until a group of workers is done.

use std::fmt;
use std::sync::Arc;

use crate::sync::waiters::Mutex as InnerLock;

use crate::scheduler::wakeups::Wakeups;
use crate::sync::waiters::{Node, WaitList, lock, park_until_served};

/// Waits until every member of a group is done. Each member holds a clone
/// and drops it when done; [`wait`](Self::wait) (which gives up the
/// caller's own membership) returns when no other member is left. Like
/// Go's `sync.WaitGroup`, without a counter to get wrong.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use fibra::sync::WaitGroup;
///
/// fibra::run(|| {
///     let done = Arc::new(AtomicUsize::new(0));
///     let wg = WaitGroup::new();
///     for _ in 0..10 {
///         let (wg, done) = (wg.clone(), done.clone());
///         fibra::spawn(move || {
///             fibra::yield_now();
///             done.fetch_add(1, Ordering::Relaxed);
///             drop(wg); // this member is done
///         });
///     }
///     wg.wait();
///     assert_eq!(done.load(Ordering::Relaxed), 10);
/// });
/// ```
pub struct WaitGroup {
    inner: Arc<InnerLock<State>>,
}

struct State {
    members: usize,
    waiters: WaitList<()>,
}

impl WaitGroup {
    /// A group with one member: the returned value.
    ///
    /// ```
    /// fibra::sync::WaitGroup::new().wait(); // the only member: no wait
    /// ```
    pub fn new() -> WaitGroup {
        WaitGroup {
            inner: Arc::new(InnerLock::new(State {
                members: 1,
                waiters: WaitList::new(),
            })),
        }
    }

    /// Leaves the group and waits until every other member has left.
    /// Parks the fiber (or blocks the thread).
    ///
    /// ```
    /// let wg = fibra::sync::WaitGroup::new();
    /// let member = wg.clone();
    /// let t = std::thread::spawn(move || drop(member));
    /// wg.wait();
    /// t.join().unwrap();
    /// ```
    pub fn wait(self) {
        let inner = self.inner.clone();
        drop(self); // leave, waking the other waiters if this was the last
        let state = lock(&inner);
        if state.members == 0 {
            return;
        }
        let node = Node::new(());
        // Nothing to take when served, and a wait without deadline always is.
        let _ = park_until_served(
            &inner,
            state,
            |s| &mut s.waiters,
            &node,
            None,
            &"WaitGroup::wait",
            || {},
            |_, _| {}, // it left the group already: nothing to undo
        );
    }
}

impl Clone for WaitGroup {
    /// A new member of the same group.
    fn clone(&self) -> WaitGroup {
        let mut state = lock(&self.inner);
        state.members = state
            .members
            .checked_add(1)
            .expect("WaitGroup: too many members");
        drop(state);
        WaitGroup {
            inner: self.inner.clone(),
        }
    }
}

impl Drop for WaitGroup {
    /// Leaves the group, waking the waiters if this was the last member.
    fn drop(&mut self) {
        let mut state = lock(&self.inner);
        state.members -= 1;
        if state.members == 0 {
            let mut wakeups = Wakeups::default();
            state.waiters.take_all_into(&mut wakeups, |_| ());
            drop(state);
            wakeups.wake();
        }
    }
}

impl Default for WaitGroup {
    fn default() -> WaitGroup {
        WaitGroup::new()
    }
}

impl fmt::Debug for WaitGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGroup")
            .field("members", &lock(&self.inner).members)
            .finish()
    }
}
