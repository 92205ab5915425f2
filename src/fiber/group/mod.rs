//! [`Group`]: fibers that end together — Go's `errgroup` and `context`,
//! tokio's `JoinSet`, Trio's nurseries.
//!
//! The face is here; the untyped core that members, waiters and parent
//! groups share is in `node.rs`, and the thread's map from member to group
//! (how a group made inside a member finds its parent) in `members.rs`.
//!
//! How the pieces stand on the fiber layer:
//!
//! - A member is an ordinary fiber of the spawner's runtime (or, from
//!   `spawn_anywhere`, a job of its workers, `fiber::queued`), spawned with
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
mod select;
mod spawn;

use std::collections::HashMap;
use std::fmt;
use std::panic;
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::fiber::entry::{OnExit, spawn_unchecked};
use crate::fiber::fiber_ref::cancel_fiber;
use crate::fiber::queued::JobHooks;
use crate::fiber::{JoinError, JoinHandle};
use crate::scheduler::context;
use crate::scheduler::core::Core;
use crate::scheduler::core::job::Job;
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::fiber_info::GroupId;
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
/// # In `select!`
///
/// A `group(g) -> res` arm of [`select!`](crate::select) (or
/// [`Select::group`](crate::channel::Select::group)) waits for the next
/// member to finish beside channels, fibers and fds; `res` is its result.
/// An empty group is never ready (members may still be spawned into it),
/// so a loop that collects them all runs while the group is not empty. A
/// dispatcher that starts jobs as they come and collects them as they
/// end, in one loop:
///
/// ```
/// use std::time::Duration;
/// use fibra::channel::{never, unbounded};
///
/// fibra::run(|| {
///     let (jobs_s, jobs) = unbounded::<u64>();
///     fibra::spawn(move || {
///         for ms in [20, 10] {
///             jobs_s.send(ms).unwrap();
///         }
///     });
///     let workers = fibra::Group::new();
///     let (mut open, closed, mut done) = (true, never(), Vec::new());
///     while open || !workers.is_empty() {
///         fibra::select! {
///             // (A closed channel is always ready: wait on `never` then.)
///             recv(if open { &jobs } else { &closed }) -> job => match job {
///                 Ok(ms) => workers.spawn(move || {
///                     fibra::sleep(Duration::from_millis(ms));
///                     ms
///                 }),
///                 Err(_) => open = false, // no more jobs
///             },
///             group(workers) -> ended => done.push(ended.unwrap()),
///         }
///     }
///     assert_eq!(done, [10, 20]);
/// });
/// ```
///
/// # In dumps
///
/// A [`Dump`](crate::runtime::Dump) names each member's group
/// ([`FiberInfo::group`](crate::runtime::FiberInfo::group), `in group 3`
/// on its line) and lists the groups as a tree, a child under its parent,
/// each with its [name](Group::named), its members still running, and its
/// deadline ([`Dump::groups`](crate::runtime::Dump::groups)), as Java's
/// thread dumps show the tree of `StructuredTaskScope`s:
///
/// ```text
/// groups: 2
///   group 1 "server" [1 member] made by fiber 1
///     group 2 "conns" [2 members, deadline in 4.9s] made by fiber 2
/// ```
///
/// # Where members run
///
/// A member of [`spawn`](Group::spawn) runs on the runtime (and, in a
/// runtime of [`workers`](crate::runtime::Builder::workers), on the
/// worker) of the fiber that spawned it, as with
/// [`fibra::spawn`](crate::spawn): it need not be `Send`. One of
/// [`spawn_anywhere`](Group::spawn_anywhere) (`Send`) goes to any worker,
/// an idle one first, as with [`Runtime::spawn`](crate::Runtime::spawn).
/// A group shared by fibers of several workers (an `Arc<Group<T>>`,
/// which is `Send + Sync` when `T: Send`) has members on each of them,
/// and is waited for and cancelled from any thread.
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
        let mut made_by = None;
        members::serve_dumps();
        if let Some(core) = context::current() {
            made_by = Some(core.current_id());
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
        let node = Node::new(parent.as_ref(), deadline, made_by);
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

    /// Names the group, for dumps: a [`Dump`](crate::runtime::Dump) lists
    /// it under this name in its tree of groups
    /// ([`Dump::groups`](crate::runtime::Dump::groups)), as Java's thread
    /// dumps name a `StructuredTaskScope`. Its members' own names are
    /// theirs to give ([`Builder::spawn_in`](crate::Builder::spawn_in)).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// fibra::run(|| {
    ///     let conns = fibra::Group::with_timeout(Duration::from_secs(5)).named("conns");
    ///     conns.spawn(|| fibra::sleep(Duration::from_secs(60)));
    ///     fibra::yield_now();
    ///     let dump = fibra::runtime::Handle::current().dump();
    ///     assert_eq!(dump.groups()[0].name.as_deref(), Some("conns"));
    ///     conns.cancel();
    /// });
    /// ```
    pub fn named(self, name: impl Into<String>) -> Group<T> {
        self.node.set_name(name.into());
        self
    }

    /// The group's identity, unique in the process: what a dump's
    /// [`FiberInfo::group`](crate::runtime::FiberInfo::group) and
    /// [`GroupInfo::id`](crate::runtime::GroupInfo::id) say.
    ///
    /// ```
    /// fibra::run(|| {
    ///     let group = fibra::Group::new();
    ///     group.spawn(|| fibra::sleep(std::time::Duration::from_secs(60)));
    ///     fibra::yield_now();
    ///     let dump = fibra::runtime::Handle::current().dump();
    ///     let member = dump.fibers().find(|f| !f.root).unwrap();
    ///     assert_eq!(member.group, Some(group.id()));
    ///     group.cancel();
    /// });
    /// ```
    pub fn id(&self) -> GroupId {
        self.node.id
    }

    fn handles(&self) -> MutexGuard<'_, Handles<T>> {
        // No user code runs under the lock (a handle's drop, which drops a
        // result, happens after it is released).
        self.handles.lock().unwrap_or_else(|e| e.into_inner())
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
        Some(self.take(id))
    }

    /// The spawn number and result of member `id`, taken out of the
    /// node's queue of finished members.
    fn take(&self, id: FiberId) -> (u64, Result<T, JoinError>) {
        let (n, handle) = self
            .handles()
            .by_id
            .remove(&id)
            .expect("fibra: a finished member of a group without its handle");
        // It has finished (see `node.rs`): this join does not park.
        (n, handle.join())
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
            .field("id", &self.id())
            .field("len", &self.len())
            .field("cancelled", &self.node.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// The earlier of two deadlines.
fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
