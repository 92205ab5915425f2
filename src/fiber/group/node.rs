//! A group's untyped core, [`Node`]: which members run and where (to
//! cancel them), the order they finished in, who waits, and the group's
//! place in the tree of groups (its children, to cancel them too).
//!
//! It holds nothing of `T`, so it is `Send + Sync` whatever the members
//! return: a parent cancels a child group from any thread, and a member
//! reports its end from its own worker, without touching a result. The
//! typed part, the members' `JoinHandle<T>`s, stays in the `Group<T>`.
//!
//! # Ground rules
//!
//! - Every field that changes is behind the one mutex, held only for a few
//!   map and queue operations: no user code, no park, no wake-up runs
//!   under it (wake-ups and cancels are collected, then sent after).
//! - A member is in `running` from just after its spawn (before it can
//!   run: it is queued on the spawner's own runtime, which does not run it
//!   before the spawner parks; a job for the workers is handed over only
//!   once it is recorded) until its exit callback ([`Node::exited`], or
//!   for a job that never runs, `never_ran`),
//!   which runs after its result is in its packet and moves its id to
//!   `finished`. So a `join` of an id taken from `finished` never waits.
//! - A member's fiber owns one count of its node (the exit callback's data),
//!   so the node outlives the member's registration in `members.rs`.
//!
//! - A select waiting for the next member (`select.rs`) is a waiter too,
//!   kept under its operation's key, so that it takes its registration
//!   out when another operation of its select was chosen; a member it
//!   takes out of `finished` is joined when the select's operation is
//!   completed, or put back at the head of the queue if it never is.
//!
//! A leaf of the folder: `members.rs`, `select.rs` and the face
//! (`mod.rs`) use it.

use std::collections::VecDeque;
use std::collections::hash_map::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::fiber::fiber_ref::FiberRef;
use crate::scheduler::context;
use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::fiber_info::{GroupId, GroupInfo};
use crate::scheduler::park::{self, Unparker};
use crate::scheduler::registry;
use crate::scheduler::wait_on::WaitOn;
use crate::timer::clock;

/// A group's untyped core; see the module docs.
pub(crate) struct Node {
    state: Mutex<State>,
    /// When the members are cancelled (ns of `timer::clock`): the group's
    /// own deadline, or an earlier one it inherited. Never changes.
    pub(super) deadline: Option<u64>,
    /// For dumps: the group's id, its parent, and the fiber that made it.
    pub(super) id: GroupId,
    parent: Option<Weak<Node>>,
    made_by: Option<FiberId>,
}

struct State {
    /// Set for good by a cancel (the group's, a parent's): members spawned
    /// afterwards are cancelled at once.
    cancelled: bool,
    /// Members that have not exited, with where they run.
    running: HashMap<FiberId, FiberRef, IdHash>,
    /// Members that have exited and were not joined yet, first first.
    finished: VecDeque<FiberId>,
    /// Contexts parked until a member exits (`join_next`, the drop): the
    /// usual one, and any others (a group that several fibers wait on).
    /// The first has a slot of its own, so that a wake-up costs no
    /// allocation.
    waiter: Option<Unparker>,
    more_waiters: Vec<Unparker>,
    /// Selects waiting for a member to exit (`Select::join_next`), each
    /// under the key of its operation, so that it can take itself out when
    /// another of its operations was chosen. Woken and emptied, as the
    /// waiters are, by the next exit.
    selects: Vec<(WatchKey, Unparker)>,
    /// The groups made inside members of this one.
    children: Vec<Weak<Node>>,
    /// The name dumps give it (`Group::named`).
    name: Option<Box<str>>,
}

impl Node {
    /// A node under `parent` (cancelled if it is), with `deadline`, made
    /// by fiber `made_by`.
    pub(super) fn new(
        parent: Option<&Arc<Node>>,
        deadline: Option<u64>,
        made_by: Option<FiberId>,
    ) -> Arc<Node> {
        let node = Arc::new(Node {
            state: Mutex::new(State {
                cancelled: false,
                running: HashMap::default(),
                finished: VecDeque::new(),
                waiter: None,
                more_waiters: Vec::new(),
                selects: Vec::new(),
                children: Vec::new(),
                name: None,
            }),
            deadline,
            id: GroupId::next(),
            parent: parent.map(Arc::downgrade),
            made_by,
        });
        if let Some(parent) = parent {
            let mut p = parent.lock();
            if p.cancelled {
                node.lock().cancelled = true;
            } else {
                // Forget the children gone since the list last grew:
                // amortised O(1) a child.
                if p.children.len() == p.children.capacity() {
                    p.children.retain(|c| c.strong_count() > 0);
                }
                p.children.push(Arc::downgrade(&node));
            }
        }
        node
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No user code runs under the lock, so nothing poisons it; should
        // something, the state is still consistent between operations.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the group was cancelled, or its deadline has passed.
    pub(super) fn is_cancelled(&self) -> bool {
        self.lock().cancelled || self.deadline.is_some_and(|d| d <= clock::now_ns())
    }

    /// Gives the group the name dumps show.
    pub(super) fn set_name(&self, name: String) {
        let old = self.lock().name.replace(name.into_boxed_str());
        drop(old);
    }

    /// What a dump says of this group, but for its parent's info (`up`).
    pub(super) fn info(&self, now: u64) -> GroupInfo {
        let (name, members, cancelled) = {
            let s = self.lock();
            let name = s.name.as_deref().map(str::to_owned);
            (name, s.running.len(), s.cancelled)
        };
        let deadline_in = self
            .deadline
            .map(|d| std::time::Duration::from_nanos(d.saturating_sub(now)));
        GroupInfo {
            id: self.id,
            name,
            parent: self.parent().map(|p| p.id),
            made_by: self.made_by,
            members,
            cancelled: cancelled || self.deadline.is_some_and(|d| d <= now),
            deadline_in,
            up: None,
        }
    }

    /// The group this one is a child of, while it lives.
    pub(super) fn parent(&self) -> Option<Arc<Node>> {
        self.parent.as_ref().and_then(Weak::upgrade)
    }

    /// Records member `id`, spawned just now, running `at`; cancels it
    /// if the group is cancelled already.
    pub(super) fn add(&self, id: FiberId, at: FiberRef) {
        let cancel = {
            let mut s = self.lock();
            let cancel = s.cancelled.then(|| at.clone());
            s.running.insert(id, at);
            cancel
        };
        if let Some(at) = cancel {
            at.cancel(id);
        }
    }

    /// Cancels every member that runs, and every child group's, at any
    /// depth; from now on, members are cancelled as they are spawned.
    pub(super) fn cancel(&self) {
        self.cancel_except(None);
    }

    /// [`cancel`](Node::cancel), but for member `me` (the caller).
    pub(super) fn cancel_except(&self, me: Option<FiberId>) {
        let (members, children): (Vec<_>, Vec<_>) = {
            let mut s = self.lock();
            s.cancelled = true;
            (
                s.running
                    .iter()
                    .filter(|(id, _)| Some(**id) != me)
                    .map(|(id, at)| (*id, at.clone()))
                    .collect(),
                s.children.iter().filter_map(Weak::upgrade).collect(),
            )
        };
        for (id, at) in members {
            at.cancel(id);
        }
        for child in children {
            child.cancel();
        }
    }

    /// Member `id` has exited (its result is in its packet).
    pub(super) fn exited(&self, id: FiberId) {
        let waiters = {
            let mut s = self.lock();
            s.running.remove(&id);
            s.finished.push_back(id);
            s.take_waiters()
        };
        waiters.wake();
    }

    /// Whether a member has finished and was not joined yet.
    pub(super) fn any_finished(&self) -> bool {
        !self.lock().finished.is_empty()
    }

    /// For a select: registers `unparker` under `key`, to be woken by the
    /// next exit; `false` (and nothing registered) when a finished member
    /// waits already.
    pub(super) fn watch(&self, key: WatchKey, unparker: Unparker) -> bool {
        let mut s = self.lock();
        if !s.finished.is_empty() {
            return false;
        }
        s.selects.push((key, unparker));
        true
    }

    /// For a select: takes the registration of `key` out, if no exit has
    /// woken it yet.
    pub(super) fn unwatch(&self, key: WatchKey) {
        let removed = {
            let mut s = self.lock();
            let i = s.selects.iter().position(|(k, _)| *k == key);
            i.map(|i| s.selects.swap_remove(i))
        };
        drop(removed); // (an `Unparker`'s drop, after the lock)
    }

    /// For a select that took member `id` and will not complete its
    /// operation (it was dropped, or unwound): back at the head of the
    /// queue, and whoever waits is told.
    pub(super) fn put_back(&self, id: FiberId) {
        let waiters = {
            let mut s = self.lock();
            s.finished.push_front(id);
            s.take_waiters()
        };
        waiters.wake();
    }

    /// The next member that finished; `None` when no member other than
    /// `me` is left to finish. Waits (a cancellation point) meanwhile.
    #[track_caller]
    pub(super) fn next_finished(&self, me: Option<FiberId>) -> Option<FiberId> {
        loop {
            {
                let mut s = self.lock();
                if let Some(id) = s.finished.pop_front() {
                    return Some(id);
                }
                if others_running(&s, me) == 0 {
                    return None;
                }
                if !context::in_runtime() {
                    check_can_finish(&s);
                }
                s.wait_here();
            }
            park::park_current(None, WaitOn::Sync(&"Group::join_next"));
        }
    }

    /// The next member that has finished, without waiting.
    pub(super) fn try_next_finished(&self) -> Option<FiberId> {
        self.lock().finished.pop_front()
    }

    /// Whether any member other than `me` runs.
    pub(super) fn any_running(&self, me: Option<FiberId>) -> bool {
        others_running(&self.lock(), me) > 0
    }

    /// Waits until no member other than `me` runs, paying no heed to the
    /// caller's own cancellation or `fibra::timeout` (the caller is a
    /// group's drop, which may run while its fiber unwinds for either,
    /// and which must not return before the members are gone). From a
    /// thread that owns a runtime that runs members but is not running
    /// (nothing would run them), returns at once instead.
    pub(super) fn wait_all_exited(&self, me: Option<FiberId>) {
        loop {
            {
                let mut s = self.lock();
                if others_running(&s, me) == 0 {
                    return;
                }
                if !context::in_runtime() && would_wait_forever(&s) {
                    return;
                }
                s.wait_here();
            }
            match context::current() {
                Some(core) => park::park_regardless(core, None, WaitOn::Sync(&"Group::drop")),
                None => std::thread::park(),
            }
        }
    }
}

/// The waiters an exit wakes, taken out under the lock, woken after it.
struct Waiters {
    first: Option<Unparker>,
    more: Vec<Unparker>,
    selects: Vec<(WatchKey, Unparker)>,
}

impl Waiters {
    fn wake(self) {
        for waiter in self.first.into_iter().chain(self.more) {
            waiter.unpark();
        }
        for (_, select) in self.selects {
            select.unpark();
        }
    }
}

impl State {
    /// Every waiter, to be woken once the lock is released.
    fn take_waiters(&mut self) -> Waiters {
        Waiters {
            first: self.waiter.take(),
            more: std::mem::take(&mut self.more_waiters),
            selects: std::mem::take(&mut self.selects),
        }
    }

    /// Registers the calling context's next park as a waiter.
    fn wait_here(&mut self) {
        let me = Unparker::current();
        match self.waiter {
            None => self.waiter = Some(me),
            Some(_) => self.more_waiters.push(me),
        }
    }
}

/// A select's operation watching a node: the address of its wait's
/// context and the operation's index, unique among the waits registered
/// at one time (a context lives until its registrations are taken out).
pub(crate) type WatchKey = (usize, usize);

/// How many members other than `me` run.
fn others_running(s: &State, me: Option<FiberId>) -> usize {
    let mine = me.is_some_and(|me| s.running.contains_key(&me));
    s.running.len() - usize::from(mine)
}

/// Whether a member runs in a runtime of the calling thread, which is not
/// inside it: a wait for that member could never end.
fn would_wait_forever(s: &State) -> bool {
    let this = std::thread::current().id();
    s.running.values().any(|at| match at {
        FiberRef::At { runtime, .. } => registry::get(*runtime).is_some_and(|r| r.owner == this),
        FiberRef::Queued(_) => false,
    })
}

/// Panics, as `JoinHandle::join` does, when a wait from this thread,
/// outside any runtime, could never end.
#[track_caller]
fn check_can_finish(s: &State) {
    if would_wait_forever(s) {
        panic!(
            "Group::join_next would wait forever: a member runs in a runtime of this \
             thread that is not running. Wait inside that runtime, e.g. \
             `rt.block_on(|| group.join_next())`."
        );
    }
}

/// The hasher of maps keyed by fiber id: the ids are distinct integers,
/// so one multiply spreads them (SipHash would cost more than the rest
/// of an insert).
pub(crate) type IdHash = BuildHasherDefault<IdHasher>;

/// See [`IdHash`].
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
