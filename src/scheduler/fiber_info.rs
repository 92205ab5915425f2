//! What a fiber dump is made of: a [`FiberInfo`] per fiber, a `Section`
//! per runtime, the [`GroupInfo`] of each group that has members in it, as
//! each runtime answers on its own thread (`core/dump.rs`). The
//! [`Dump`](crate::runtime::Dump) of them, and how it prints, is
//! `observe/dump.rs`; how one is collected from runtimes on other threads
//! is `runtime/dump.rs`.
//!
//! Groups (`fibra::Group`) live in the fiber layer, above this one: the
//! scheduler does not know which fiber is in which group. The fiber layer
//! tells a dump through [`GROUPS`], a hook it sets when it makes its first
//! group, which the runtime calls on its own thread with the section's
//! fibers (see `core/dump.rs`). So a fiber that is in no group, and a
//! spawn, park or switch, pay nothing for groups; a dump of a program
//! that never made one pays a load.

use std::fmt;
use std::num::NonZeroU64;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::stack_trace::Sampled;
use crate::scheduler::stack_trace::StackTrace;
use crate::scheduler::stack_trace::walk::RawStack;
use crate::scheduler::watch::starve_record::Starved;

/// How long a dump waits for runtimes on other threads to answer.
pub(crate) const ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// What a fiber is doing, in a [`Dump`](crate::runtime::Dump).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FiberState {
    /// In the run queue.
    Ready,
    /// Running: the fiber that asked for the dump, or one busy on another
    /// thread.
    Running,
    /// Blocked; [`FiberInfo::waiting_on`] says on what.
    Parked,
}

/// One fiber of a [`Dump`](crate::runtime::Dump).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FiberInfo {
    /// The fiber's id.
    pub id: FiberId,
    /// Its name, if it was given one.
    pub name: Option<String>,
    /// The [`Group`](crate::Group) it is a member of, if any: one of
    /// [`Dump::groups`](crate::runtime::Dump::groups), where its name, its parent and its deadline are.
    pub group: Option<GroupId>,
    /// Whether this is `block_on`'s closure on a current-thread runtime
    /// (the thread's own stack) rather than a spawned fiber.
    pub root: bool,
    /// What it is doing.
    pub state: FiberState,
    /// For a parked fiber, what it waits for: `sleep`, `fd 7 READABLE`,
    /// `join of fiber 12`, `Mutex::lock`, `channel receive`...
    pub waiting_on: Option<String>,
    /// For a parked fiber with a deadline, how long until it.
    pub deadline_in: Option<Duration>,
    /// For a running fiber that keeps its thread (one that made its
    /// runtime miss the dump), how long it has run since it last parked, as
    /// far as fibra saw (a lower bound).
    pub running_for: Option<Duration>,
    /// Where it was spawned (`None` for the root).
    pub spawned_at: Option<&'static Location<'static>>,
    /// For a parked or ready fiber, the bytes of its stack in use (from
    /// its saved stack pointer; the deepest it went may be more).
    pub stack_used: Option<usize>,
    /// How long it has run: the time from each switch into it to the
    /// switch out, summed (see [`Builder::cpu_time`](crate::runtime::Builder::cpu_time),
    /// which turns the count on). Its code's CPU time, plus any time its
    /// thread was blocked in a call that does not park, or preempted.
    /// `None` where the runtime does not count, for `block_on`'s closure
    /// (whose thread also runs the scheduler), and in a section answered
    /// for a runtime that did not answer.
    pub cpu_time: Option<Duration>,
    /// Where it is: its frames from where it parked (or, for the fiber
    /// that asked for the dump, from its call of `dump`) out to the closure
    /// it runs, with fibra's own frames left out but for the call the
    /// user made into fibra (`Mutex::lock`, `TcpStream::read`). A fiber
    /// parked inside a [`Generator`](crate::Generator)'s body shows the
    /// generator's frames, whose stack it is on. For a fiber that holds
    /// another thread's runtime (the dump could not be answered), its
    /// frames where it runs now, sampled by stopping that thread for the
    /// walk (see `runtime::Builder::stall_warning`). `None` for a fiber
    /// that has not started, for one running on another thread otherwise,
    /// and where a sample could not be taken (the dump says why). Walked
    /// without running the fiber, and only when a dump is taken: parks and
    /// switches pay nothing for it.
    pub stack: Option<StackTrace>,
    /// Its group and, up the chain, the group's ancestors, as the fiber
    /// layer told them (see [`GROUPS`]); [`Dump::groups`](crate::runtime::Dump::groups) is made of them.
    pub(crate) in_group: Option<Arc<GroupInfo>>,
}

/// A [`Group`](crate::Group)'s identity, unique in the process for its
/// whole life, as [`FiberId`] is a fiber's; see [`Group::id`](crate::Group::id).
/// It prints as its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(NonZeroU64);

impl GroupId {
    /// A new id (groups are made far more rarely than fibers: one counter).
    pub(crate) fn next() -> GroupId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        GroupId(NonZeroU64::new(n).expect("group ids exhausted"))
    }

    /// The id as a number (for logs and metrics).
    ///
    /// ```
    /// let group = fibra::Group::<()>::new();
    /// assert!(group.id().as_u64() > 0);
    /// ```
    pub fn as_u64(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One [`Group`](crate::Group) of a [`Dump`](crate::runtime::Dump), as
/// [`Dump::groups`](crate::runtime::Dump::groups) lists them: like a thread container of Java's
/// `jcmd <pid> Thread.dump_to_file`, with its place in the tree of groups
/// (a group made inside a member of another is its child). The fibers in
/// it are those of [`Dump::fibers`](crate::runtime::Dump::fibers) whose [`group`](FiberInfo::group) is
/// its `id`.
///
/// ```
/// use std::time::Duration;
///
/// fibra::run(|| {
///     let server = fibra::Group::new().named("server");
///     server.spawn(|| {
///         let conns = fibra::Group::with_timeout(Duration::from_secs(5)).named("conns");
///         conns.spawn(|| fibra::sleep(Duration::from_secs(60)));
///         while conns.join_next().is_some() {}
///     });
///     fibra::yield_now();
///     fibra::yield_now();
///     let dump = fibra::runtime::Handle::current().dump();
///     let conns = dump.groups().iter().find(|g| g.name.as_deref() == Some("conns")).unwrap();
///     assert_eq!(conns.parent, Some(server.id()));
///     assert_eq!(conns.members, 1);
///     assert!(conns.deadline_in.unwrap() <= Duration::from_secs(5));
///     let in_conns = dump.fibers().filter(|f| f.group == Some(conns.id)).count();
///     assert_eq!(in_conns, 1);
///     server.cancel();
/// });
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct GroupInfo {
    /// The group's id: [`Group::id`](crate::Group::id).
    pub id: GroupId,
    /// Its name, if it was given one ([`Group::named`](crate::Group::named)).
    pub name: Option<String>,
    /// The group it is a child of (it was made inside a member of that
    /// one), while that group lives.
    pub parent: Option<GroupId>,
    /// The fiber that made it, if a fiber did (for a group made by
    /// `block_on`'s closure, that closure's id).
    pub made_by: Option<FiberId>,
    /// How many of its members have not finished, on every thread (the
    /// dump lists those of the runtimes it covers).
    pub members: usize,
    /// Whether it was cancelled (by [`Group::cancel`](crate::Group::cancel),
    /// its parent, or its deadline).
    pub cancelled: bool,
    /// How long until its deadline (zero once past), if it has one.
    pub deadline_in: Option<Duration>,
    /// Its parent's info, for [`Dump::groups`](crate::runtime::Dump::groups) to list the ancestors of
    /// the fibers' groups.
    pub(crate) up: Option<Arc<GroupInfo>>,
}

impl fmt::Debug for GroupInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupInfo")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("parent", &self.parent)
            .field("made_by", &self.made_by)
            .field("members", &self.members)
            .field("cancelled", &self.cancelled)
            .field("deadline_in", &self.deadline_in)
            .finish()
    }
}

/// The fiber layer's answer to a dump, set once when it makes its first
/// group: given the fibers of the runtime on the calling thread (the
/// runtime's own, answering a dump), it sets each member's
/// [`in_group`](FiberInfo::in_group) and [`group`](FiberInfo::group). It
/// runs no user code and does not touch the runtime.
pub(crate) static GROUPS: OnceLock<fn(&mut [FiberInfo])> = OnceLock::new();

/// The fibers of one runtime thread.
#[derive(Clone, Debug)]
pub(crate) struct Section {
    /// The thread's name (`fibra-worker-N`, `main`...).
    pub(crate) thread: String,
    /// `None`: the runtime did not answer in time.
    pub(crate) fibers: Option<Vec<FiberInfo>>,
    /// When it did not answer because a context kept its thread: that one,
    /// and its stack as sampled while it ran (named into its
    /// [`FiberInfo::stack`] by `observe::dump_names::resolve`), or why there is none.
    pub(crate) stalled: Option<FiberInfo>,
    pub(crate) stalled_stack: Option<Sampled>,
    /// With `stalled`: why its other fibers are not in `fibers` (read
    /// while it held the thread: `debugger::held`), or how many of them
    /// were left out.
    pub(crate) held_note: Option<String>,
    /// When it did not answer because its fibers kept it busy, taking
    /// turns without a poll: for how long, and which took most of it.
    pub(crate) busy: Option<Busy>,
    /// The return addresses of the listed fibers' stacks, by their index
    /// in `fibers`, as the runtime took them; `observe::dump_names::resolve` names them
    /// into each one's [`FiberInfo::stack`].
    pub(crate) stacks: Vec<(usize, RawStack)>,
}

/// Why a runtime that runs fibers did not answer a dump: it has not
/// polled (for I/O, timers and messages such as the dump's) for `for_` at
/// least, as the stall watchdog sampled it.
#[derive(Clone, Debug)]
pub(crate) struct Busy {
    /// The watchdog's record, if it keeps one for this runtime.
    pub(crate) starved: Option<Starved>,
    /// The context running when the dump gave up waiting.
    pub(crate) running: Option<String>,
}
