//! [`Group`]: fibers that end together — Go's `errgroup` and `context`,
//! tokio's `JoinSet`, Trio's nurseries.
//!
//! The face is here; the untyped core that members, waiters and parent
//! groups share is in `node.rs`, and the thread's map from member to group
//! (how a group made inside a member finds its parent) in `members.rs`.
//!
//! How the pieces stand on the fiber layer:
//!
//! - A member is an ordinary fiber of the spawner's runtime, spawned with
//!   an exit callback (`entry::OnExit`, as a scope's fibers are) that runs
//!   after its result is in its packet: it moves the member's id to the
//!   node's queue of finished members and wakes whoever waits. So
//!   [`Group::join_next`] takes members in the order they finished, and
//!   the `JoinHandle::join` it then makes never parks.
//! - Cancelling is `JoinHandle::cancel` of every member that runs, and
//!   then the same in every child group, at any depth.
//! - A deadline needs no timer of its own: each member runs inside the
//!   group's deadline as inside a `fibra::timeout` (`park::with_deadline`),
//!   so the timer of the park it waits in wakes it and unwinds it there;
//!   it then cancels itself, so that its result is a cancelled
//!   [`JoinError`] as after [`Group::cancel`]. A child group takes its
//!   parent's deadline when it is earlier than its own.
//! - The drop waits as a scope's end does: uncancellably
//!   (`park_regardless`), since it may run while its fiber unwinds.

mod errgroup;
mod members;
mod node;

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::panic;
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::fiber::entry::{OnExit, spawn_unchecked};
use crate::fiber::fiber_ref::cancel_fiber;
use crate::fiber::{JoinError, JoinHandle};
use crate::scheduler::context;
use crate::scheduler::core::Core;
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::park;
use crate::timer::clock;

use node::{IdHash, Node};

/// A set of fibers that end together: no member outlives the group.
///
/// - [`spawn`](Group::spawn) makes a member; [`join_next`](Group::join_next)
///   gives each member's result in the order they finish;
///   [`cancel`](Group::cancel) unwinds every member from where it waits.
/// - A group made with [`with_timeout`](Group::with_timeout) or
///   [`with_deadline`](Group::with_deadline) cancels every member still
///   running at its deadline, whether or not anyone is waiting on it.
/// - **Dropping the group cancels the members left, and returns only once
///   they have unwound** (their destructors have run).
/// - For an `errgroup`, [`try_join_all`](Group::try_join_all): the first
///   error cancels the rest and is returned.
///
/// Its methods take `&self`, so members can spawn into their own group
/// (share it with an `Rc`, or an `Arc` across workers).
///
/// # Cancellation flows down
///
/// A group made inside a member of another group is that group's *child*:
/// cancelling the parent, or its deadline, cancels the child's members
/// too, at any depth, and a child never has a later deadline than its
/// parent. A group made inside a [`fibra::timeout`](crate::timeout) takes
/// the timeout's deadline (if it is earlier than its own), and one made
/// by a fiber that is cancelled starts cancelled; either way, the group
/// owned by code that a timeout or a cancel unwinds is dropped, and so
/// cancelled and waited for, as it unwinds.
///
/// A group that is cancelled (by [`cancel`](Group::cancel), its deadline,
/// or its parent) stays so: a member spawned afterwards is cancelled
/// before it runs.
///
/// # Where members run
///
/// A member runs on the runtime (and, in a runtime of
/// [`workers`](crate::runtime::Builder::workers), on the worker) of the
/// fiber that spawned it, as with [`fibra::spawn`](crate::spawn). A group
/// shared by fibers of several workers (an `Arc<Group<T>>`, which is
/// `Send + Sync` when `T: Send`) has members on each of them, and is
/// waited for and cancelled from any thread.
///
/// ```
/// use std::time::Duration;
///
/// fibra::run(|| {
///     let group = fibra::Group::new();
///     for i in 1..=3u64 {
///         group.spawn(move || {
///             fibra::sleep(Duration::from_millis(30 * (4 - i)));
///             i
///         });
///     }
///     let mut order = Vec::new();
///     while let Some(result) = group.join_next() {
///         order.push(result.unwrap());
///     }
///     assert_eq!(order, [3, 2, 1]); // the order they finished in
/// });
/// ```
pub struct Group<T> {
    node: Arc<Node>,
    handles: Mutex<Handles<T>>,
}

/// The members not joined yet, each with the number of its spawn.
struct Handles<T> {
    by_id: HashMap<FiberId, (u64, JoinHandle<T>), IdHash>,
    spawned: u64,
}

impl<T> Group<T> {
    /// An empty group with no deadline (but that of its parent, if it is
    /// made inside a member of another group, or of the
    /// [`fibra::timeout`](crate::timeout) it is made in).
    ///
    /// It may be made anywhere, a plain thread too; its members are
    /// spawned from fibers.
    ///
    /// ```
    /// let group = fibra::Group::<()>::new();
    /// assert!(group.is_empty());
    /// ```
    pub fn new() -> Group<T> {
        Group::with(None)
    }

    /// A group whose members still running `timeout` from now are
    /// cancelled then.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// fibra::run(|| {
    ///     let group = fibra::Group::with_timeout(Duration::from_millis(20));
    ///     group.spawn(|| {
    ///         fibra::sleep(Duration::from_secs(3600));
    ///         0
    ///     });
    ///     group.spawn(|| 7);
    ///     assert_eq!(group.join_next().unwrap().unwrap(), 7);
    ///     assert!(group.join_next().unwrap().unwrap_err().is_cancelled());
    /// });
    /// ```
    pub fn with_timeout(timeout: Duration) -> Group<T> {
        Group::with(Some(clock::after_ns(timeout)))
    }

    /// A group whose members still running at `deadline` are cancelled
    /// then.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// fibra::run(|| {
    ///     let deadline = Instant::now() + Duration::from_millis(20);
    ///     let group = fibra::Group::with_deadline(deadline);
    ///     group.spawn(|| fibra::sleep(Duration::from_secs(3600)));
    ///     assert!(group.join_next().unwrap().unwrap_err().is_cancelled());
    ///     assert!(Instant::now() >= deadline);
    /// });
    /// ```
    pub fn with_deadline(deadline: Instant) -> Group<T> {
        Group::with(Some(clock::instant_ns(deadline)))
    }

    /// A group with its own `deadline` (ns), placed in the tree.
    fn with(deadline: Option<u64>) -> Group<T> {
        let mut deadline = deadline;
        let mut cancelled = false;
        let mut parent = None;
        if let Some(core) = context::current() {
            // Inside a `fibra::timeout`, or cancelled: what the caller would
            // unwind for at its next park bounds the group too. (Not while
            // it unwinds already: its parks ignore both then, and so does a
            // group it makes to clean up.)
            if !core.current_is_unwinding() {
                match park::owed_unwind(core) {
                    Ok(scope) => deadline = earliest(deadline, scope.map(|s| s.deadline)),
                    Err(_) => cancelled = true,
                }
            }
            parent = members::group_of(core.current_id());
        }
        if let Some(parent) = &parent {
            deadline = earliest(deadline, parent.deadline);
        }
        let node = Node::new(parent.as_ref(), deadline);
        if cancelled {
            node.cancel();
        }
        Group {
            node,
            handles: Mutex::new(Handles {
                by_id: HashMap::default(),
                spawned: 0,
            }),
        }
    }

    fn handles(&self) -> MutexGuard<'_, Handles<T>> {
        // No user code runs under the lock (a handle's drop, which drops a
        // result, happens after it is released).
        self.handles.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Spawns a member running `f` on the current runtime, as
    /// [`fibra::spawn`](crate::spawn) does (`f` need not be `Send`). Use
    /// [`Builder::spawn_in`](crate::Builder::spawn_in) for a name, a stack
    /// size, or to handle a failure to map the stack.
    ///
    /// A member spawned into a cancelled group, or after its deadline, is
    /// cancelled before it runs.
    ///
    /// # Panics
    ///
    /// Outside a fibra runtime, or if the stack cannot be mapped.
    ///
    /// A member may spawn into its own group:
    ///
    /// ```
    /// use std::rc::Rc;
    ///
    /// fibra::run(|| {
    ///     let group = Rc::new(fibra::Group::new());
    ///     let g = group.clone();
    ///     group.spawn(move || {
    ///         g.spawn(|| "child");
    ///         "parent"
    ///     });
    ///     let mut got: Vec<_> = std::iter::from_fn(|| group.join_next())
    ///         .map(Result::unwrap)
    ///         .collect();
    ///     got.sort();
    ///     assert_eq!(got, ["child", "parent"]);
    /// });
    /// ```
    #[track_caller]
    pub fn spawn<F>(&self, f: F)
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let core = context::expect("fibra::Group::spawn");
        if let Err(e) = self.spawn_on(core, f, None, core.default_stack, false) {
            cannot_spawn(e);
        }
    }

    /// Spawns a member on `core` (the runtime entered on this thread).
    #[track_caller]
    pub(crate) fn spawn_on<F>(
        &self,
        core: &Core,
        f: F,
        name: Option<Arc<str>>,
        stack_size: usize,
        idle: bool,
    ) -> io::Result<()>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let data = Arc::into_raw(self.node.clone());
        let on_exit = OnExit {
            call: exited,
            data: data.cast(),
        };
        let exit = Some((on_exit, ptr::null()));
        // `f` and `T` are 'static; `exited` takes back the count `data` owns.
        // SAFETY: as argued just above.
        let spawned = unsafe {
            match self.node.deadline {
                None => spawn_unchecked(core, f, name, stack_size, exit, idle),
                Some(d) => spawn_unchecked(core, move || until(d, f), name, stack_size, exit, idle),
            }
        };
        let handle = match spawned {
            Ok(handle) => handle,
            Err(e) => {
                // The fiber was not made, and will not call `exited`.
                // SAFETY: `data` came from `Arc::into_raw` above.
                drop(unsafe { Arc::from_raw(data) });
                return Err(e);
            }
        };
        // The member does not run before this fiber parks: it is queued on
        // this thread's runtime. So it is recorded before it can exit.
        let (id, at) = (handle.fiber().id(), handle.location());
        {
            let mut h = self.handles();
            let n = h.spawned;
            h.spawned += 1;
            h.by_id.insert(id, (n, handle));
        }
        members::join(id, &self.node);
        self.node.add(id, at);
        if self.node.deadline.is_some_and(|d| d <= clock::now_ns()) {
            self.node.cancel(); // (all its members are past the deadline)
        }
        Ok(())
    }

    /// Waits for the next member to finish and returns its result: its
    /// value, or a [`JoinError`] if it panicked or was cancelled. Members
    /// come in the order they finished. `None` when no member is left to
    /// finish (for a member of this very group: no member but itself).
    ///
    /// From a fiber this parks the fiber (a cancellation point, as
    /// [`JoinHandle::join`] is); from a plain thread it blocks the thread.
    ///
    /// # Panics
    ///
    /// When the wait could never end: from a runtime's own thread, outside
    /// it, while a member of that runtime runs (nothing would run it).
    ///
    /// ```
    /// fibra::run(|| {
    ///     let group = fibra::Group::new();
    ///     group.spawn(|| 1);
    ///     group.spawn(|| panic!("boom"));
    ///     assert_eq!(group.join_next().unwrap().unwrap(), 1);
    ///     assert!(group.join_next().unwrap().unwrap_err().is_panic());
    ///     assert!(group.join_next().is_none());
    /// });
    /// ```
    #[track_caller]
    pub fn join_next(&self) -> Option<Result<T, JoinError>> {
        self.next(true).map(|(_, result)| result)
    }

    /// The result of a member that has finished, if there is one, without
    /// waiting: to collect finished members of a long-lived group (a
    /// server's connections) as it goes.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let group = fibra::Group::new();
    ///     group.spawn(|| 5);
    ///     assert!(group.try_join_next().is_none()); // not run yet
    ///     fibra::yield_now();
    ///     assert_eq!(group.try_join_next().unwrap().unwrap(), 5);
    /// });
    /// ```
    pub fn try_join_next(&self) -> Option<Result<T, JoinError>> {
        self.next(false).map(|(_, result)| result)
    }

    /// The next finished member's spawn number and result, waiting for it
    /// if `wait`.
    #[track_caller]
    fn next(&self, wait: bool) -> Option<(u64, Result<T, JoinError>)> {
        let id = if wait {
            let me = context::current().map(Core::current_id);
            self.node.next_finished(me)?
        } else {
            self.node.try_next_finished()?
        };
        let (n, handle) = self
            .handles()
            .by_id
            .remove(&id)
            .expect("fibra: a finished member of a group without its handle");
        // It has finished (see `node.rs`): this join does not park.
        Some((n, handle.join()))
    }

    /// Cancels every member: each unwinds from where it waits (its
    /// destructors run), or never runs if it has not started, and its
    /// result is a [`JoinError`] for which
    /// [`is_cancelled`](JoinError::is_cancelled) holds; a member that does
    /// not park is cancelled at its next [`yield_now`](crate::yield_now)
    /// (see [`JoinHandle::cancel`]). The members of child groups are
    /// cancelled too, at any depth, and members spawned later are
    /// cancelled before they run. Returns at once: wait for the members
    /// with [`join_next`](Group::join_next), or by dropping the group.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// fibra::run(|| {
    ///     let group = fibra::Group::new();
    ///     for _ in 0..3 {
    ///         group.spawn(|| fibra::sleep(Duration::from_secs(3600)));
    ///     }
    ///     fibra::yield_now(); // they start sleeping
    ///     group.cancel();
    ///     while let Some(result) = group.join_next() {
    ///         assert!(result.unwrap_err().is_cancelled());
    ///     }
    /// });
    /// ```
    pub fn cancel(&self) {
        self.node.cancel();
    }

    /// How many members the group holds: running, or finished and not
    /// joined yet.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let group = fibra::Group::new();
    ///     group.spawn(|| ());
    ///     group.spawn(|| ());
    ///     assert_eq!(group.len(), 2);
    ///     group.join_next();
    ///     assert_eq!(group.len(), 1);
    /// });
    /// ```
    pub fn len(&self) -> usize {
        self.handles().by_id.len()
    }

    /// Whether the group holds no member (see [`len`](Group::len)).
    ///
    /// ```
    /// fibra::run(|| {
    ///     let group = fibra::Group::new();
    ///     assert!(group.is_empty());
    ///     group.spawn(|| ());
    ///     assert!(!group.is_empty());
    /// });
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Default for Group<T> {
    /// [`Group::new`].
    ///
    /// ```
    /// let group: fibra::Group<u8> = Default::default();
    /// assert!(group.is_empty());
    /// ```
    fn default() -> Group<T> {
        Group::new()
    }
}

/// Cancels the members still running and waits until they have unwound
/// (their destructors have run), whether or not the dropping fiber is
/// itself cancelled or unwinding; the results not joined are dropped.
/// A member that drops its own group (the last `Rc` of it) is neither
/// cancelled nor waited for.
///
/// Dropped on a thread that owns the runtime its members run in, outside
/// that runtime (nothing would run them), it cancels them and returns at
/// once: they unwind when the runtime next runs, or is dropped.
///
/// ```
/// use std::{cell::Cell, rc::Rc, time::Duration};
///
/// struct Flag(Rc<Cell<bool>>);
/// impl Drop for Flag {
///     fn drop(&mut self) {
///         self.0.set(true);
///     }
/// }
///
/// fibra::run(|| {
///     let unwound = Rc::new(Cell::new(false));
///     let group = fibra::Group::new();
///     let flag = Flag(unwound.clone());
///     group.spawn(move || {
///         let _flag = flag;
///         fibra::sleep(Duration::from_secs(3600));
///     });
///     fibra::yield_now();
///     drop(group);
///     assert!(unwound.get()); // the member's destructors ran before the drop returned
/// });
/// ```
impl<T> Drop for Group<T> {
    fn drop(&mut self) {
        let me = context::current().map(Core::current_id);
        if self.node.any_running(me) {
            self.node.cancel_except(me);
            self.node.wait_all_exited(me);
        }
    }
}

impl<T> fmt::Debug for Group<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("len", &self.len())
            .field("cancelled", &self.node.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// A member's exit callback: see `node.rs`.
///
/// # Safety
///
/// `data` came from `Arc::into_raw` of the member's node; this is called
/// once, on the member's fiber, and takes that count back.
unsafe fn exited(data: *const ()) {
    // SAFETY: per the contract.
    let node = unsafe { Arc::from_raw(data.cast::<Node>()) };
    let Some(core) = context::current() else {
        return; // (unreachable: a fiber's end runs in its runtime)
    };
    let id = core.current_id();
    members::leave(id);
    node.exited(id);
}

/// Runs a member's `f` until the group's `deadline` (ns): past it, where
/// `f` parks it unwinds, and the member is cancelled.
fn until<T>(deadline: u64, f: impl FnOnce() -> T) -> T {
    let core = context::expect("a fibra::Group member");
    match park::with_deadline(core, deadline, f) {
        Some(value) => value,
        None => {
            // Its destructors ran; now make it a cancelled member, as if
            // `cancel` had hit it there.
            cancel_fiber(core.id, core.current_key(), core.current_id());
            park::check_unwind(core);
            unreachable!("a cancelled fiber did not unwind");
        }
    }
}

/// The earlier of two deadlines.
fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The panic of a failed [`Group::spawn`], out of line.
#[cold]
#[inline(never)]
#[track_caller]
fn cannot_spawn(e: io::Error) -> ! {
    panic!("fibra::Group::spawn: cannot create a fiber: {e}")
}
