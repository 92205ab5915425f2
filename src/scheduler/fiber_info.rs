//! What a fiber dump says: a [`FiberInfo`] per fiber, a `Section` per
//! runtime, the [`GroupInfo`] of each group that has members in it, and
//! the [`Dump`] of them, as it prints. How one is collected from runtimes
//! on other threads is `dump.rs`.
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
use crate::scheduler::stack_trace::StackTrace;
use crate::scheduler::stack_trace::sample::Sampled;
use crate::scheduler::stack_trace::walk::RawStack;
use crate::scheduler::watch::starve_record::Starved;

/// How long a dump waits for runtimes on other threads to answer.
pub(crate) const ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// What a fiber is doing, in a [`Dump`].
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

/// One fiber of a [`Dump`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FiberInfo {
    /// The fiber's id.
    pub id: FiberId,
    /// Its name, if it was given one.
    pub name: Option<String>,
    /// The [`Group`](crate::Group) it is a member of, if any: one of
    /// [`Dump::groups`], where its name, its parent and its deadline are.
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
    /// layer told them (see [`GROUPS`]); [`Dump::groups`] is made of them.
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

/// One [`Group`](crate::Group) of a [`Dump`], as
/// [`Dump::groups`] lists them: like a thread container of Java's
/// `jcmd <pid> Thread.dump_to_file`, with its place in the tree of groups
/// (a group made inside a member of another is its child). The fibers in
/// it are those of [`Dump::fibers`] whose [`group`](FiberInfo::group) is
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
    /// Its parent's info, for [`Dump::groups`] to list the ancestors of
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

impl fmt::Display for GroupInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "group {}", self.id)?;
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        let s = if self.members == 1 { "" } else { "s" };
        write!(f, " [{} member{s}", self.members)?;
        if self.cancelled {
            f.write_str(", cancelled")?;
        } else if let Some(left) = self.deadline_in {
            write!(f, ", deadline in {left:.1?}")?;
        }
        f.write_str("]")?;
        if let Some(by) = self.made_by {
            write!(f, " made by fiber {by}")?;
        }
        Ok(())
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

/// Every fiber of a runtime, from [`Runtime::dump`](crate::Runtime::dump).
/// Its `Display` prints the [groups](Dump::groups) the fibers are in as a
/// tree (a child group under its parent), then one line per fiber, grouped
/// by thread, each with its group and its stack under it (see
/// [`FiberInfo::stack`]):
///
/// ```text
/// groups: 2
///   group 1 "server" [1 member] made by fiber 1
///     group 2 "conns" [1 member, deadline in 4.9s] made by fiber 2
/// thread "main": 4 fibers
///   fiber 1 (block_on) [parked: join of fiber 2]
///       fibra::fiber::join::JoinHandle<T>::join
///           at ./src/fiber/join.rs:88:14
///       app::main::{{closure}}
///           at ./src/main.rs:12:9
///   fiber 2 "worker" [parked: Mutex::lock] stack 2368 B spawned at src/main.rs:8:5
///       fibra::sync::mutex::Mutex<T>::lock
///           at ./src/sync/mutex.rs:127:14
///       app::update
///           at ./src/main.rs:30:17
///   fiber 3 "accept" in group 1 [parked: Group::join_next] spawned at src/main.rs:20:5
///       ...
///   fiber 4 in group 2 [parked: fd 9 READABLE] spawned at src/main.rs:24:9
///       ...
/// ```
///
/// ```
/// use std::time::Duration;
///
/// let rt = fibra::Runtime::new()?;
/// rt.spawn(|| fibra::sleep(Duration::from_secs(60)));
/// rt.turn(Some(Duration::ZERO)); // it starts and parks
/// let dump = rt.dump();
/// assert_eq!(dump.fibers().count(), 1);
/// assert!(dump.to_string().contains("[parked: sleep"), "{dump}");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Dump {
    pub(crate) sections: Vec<Section>,
    /// Every group of the listed fibers, with their ancestors, by id.
    pub(crate) groups: Vec<GroupInfo>,
}

impl Dump {
    /// The dump of `sections`, its groups gathered from their fibers.
    pub(crate) fn new(sections: Vec<Section>) -> Dump {
        let mut groups: Vec<GroupInfo> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for section in &sections {
            for fiber in section.fibers.iter().flatten() {
                let mut up = fiber.in_group.as_deref();
                // Up to the first group listed already: its ancestors are.
                while let Some(group) = up.filter(|g| seen.insert(g.id)) {
                    groups.push(group.clone());
                    up = group.up.as_deref();
                }
            }
        }
        for group in &mut groups {
            group.up = None; // (its parent is listed too)
        }
        groups.sort_unstable_by_key(|g| g.id);
        Dump { sections, groups }
    }

    /// The [`Group`](crate::Group)s the listed fibers are members of, and
    /// their ancestors, by id (the order they were made in): a tree by
    /// their [`parent`](GroupInfo::parent)s, as the dump's `Display`
    /// prints it. A group none of whose members (nor its descendants')
    /// is listed is not.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// fibra::run(|| {
    ///     let jobs = fibra::Group::new().named("jobs");
    ///     jobs.spawn(|| fibra::sleep(Duration::from_secs(60)));
    ///     fibra::yield_now();
    ///     let dump = fibra::runtime::Handle::current().dump();
    ///     assert_eq!(dump.groups().len(), 1);
    ///     assert_eq!(dump.groups()[0].id, jobs.id());
    ///     let text = dump.to_string();
    ///     assert!(text.contains(&format!("group {} \"jobs\" [1 member]", jobs.id())), "{text}");
    ///     assert!(text.contains(&format!("in group {}", jobs.id())), "{text}");
    ///     jobs.cancel();
    /// });
    /// ```
    pub fn groups(&self) -> &[GroupInfo] {
        &self.groups
    }

    /// Every fiber listed, from all threads that answered.
    pub fn fibers(&self) -> impl Iterator<Item = &FiberInfo> {
        self.sections
            .iter()
            .flat_map(|s| s.fibers.iter().flatten().chain(&s.stalled))
    }

    /// Whether every runtime thread answered in time.
    pub fn is_complete(&self) -> bool {
        self.sections
            .iter()
            .all(|s| s.fibers.is_some() && s.stalled.is_none())
    }
}

impl fmt::Display for FiberInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fiber {}", self.id)?;
        if self.root {
            f.write_str(" (block_on)")?;
        }
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        if let Some(group) = self.group {
            write!(f, " in group {group}")?;
        }
        match self.state {
            FiberState::Ready => f.write_str(" [ready]")?,
            FiberState::Running => match self.running_for {
                Some(d) => write!(f, " [running for {d:.1?} without blocking]")?,
                None => f.write_str(" [running]")?,
            },
            FiberState::Parked => {
                f.write_str(" [parked")?;
                if let Some(on) = &self.waiting_on {
                    write!(f, ": {on}")?;
                }
                if let Some(left) = self.deadline_in {
                    write!(f, ", {left:.1?} left")?;
                }
                f.write_str("]")?;
            }
        }
        if let Some(used) = self.stack_used {
            write!(f, " stack {used} B")?;
        }
        if let Some(ran) = self.cpu_time {
            write!(f, " ran {ran:.1?}")?;
        }
        if let Some(at) = self.spawned_at {
            write!(f, " spawned at {at}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Dump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.groups.is_empty() {
            writeln!(f, "groups: {}", self.groups.len())?;
            self.write_group_tree(f)?;
        }
        for section in &self.sections {
            if let Some(fiber) = &section.stalled {
                write_held(f, section, fiber)?;
                continue;
            }
            match &section.fibers {
                Some(fibers) => {
                    writeln!(f, "thread {:?}: {} fibers", section.thread, fibers.len())?;
                    for fiber in fibers {
                        writeln!(f, "  {fiber}")?;
                        if let Some(stack) = &fiber.stack {
                            stack.write_indented(f, "      ")?;
                        }
                    }
                }
                None => match &section.busy {
                    Some(busy) => {
                        write!(
                            f,
                            "thread {:?}: did not answer within {ANSWER_WITHIN:?}: busy \
                             running fibers that take turns without polling for I/O and \
                             timers",
                            section.thread
                        )?;
                        if let Some(starved) = &busy.starved {
                            write!(
                                f,
                                " (for {:.1?}); most of that time (sampled): {}",
                                starved.for_,
                                starved.list()
                            )?;
                        }
                        if let Some(running) = &busy.running {
                            write!(f, "; running now: {running}")?;
                        }
                        writeln!(f)?;
                    }
                    None => writeln!(
                        f,
                        "thread {:?}: did not answer within {ANSWER_WITHIN:?} (a \
                         runtime nobody drives?)",
                        section.thread
                    )?,
                },
            }
        }
        Ok(())
    }
}

impl Dump {
    /// The groups as a tree, a child under its parent, indented by depth.
    fn write_group_tree(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Each group's children, in id order (as `groups` is); a group
        // whose parent is not listed is a root.
        let mut children: std::collections::HashMap<GroupId, Vec<&GroupInfo>> =
            std::collections::HashMap::new();
        let mut roots = Vec::new();
        for group in &self.groups {
            match group
                .parent
                .filter(|p| self.groups.binary_search_by_key(p, |g| g.id).is_ok())
            {
                Some(parent) => children.entry(parent).or_default().push(group),
                None => roots.push(group),
            }
        }
        // Depth first.
        let mut stack: Vec<(&GroupInfo, usize)> = roots.into_iter().rev().map(|g| (g, 1)).collect();
        while let Some((group, depth)) = stack.pop() {
            writeln!(f, "{:width$}{group}", "", width = 2 * depth)?;
            if let Some(under) = children.get(&group.id) {
                stack.extend(under.iter().rev().map(|g| (*g, depth + 1)));
            }
        }
        Ok(())
    }
}

/// A section of a runtime held by one fiber: that fiber and where it runs,
/// then its other fibers as read while it held the thread
/// (`debugger::held`), or why they are not listed.
fn write_held(f: &mut fmt::Formatter<'_>, section: &Section, fiber: &FiberInfo) -> fmt::Result {
    writeln!(
        f,
        "thread {:?}: did not answer, held by one fiber:\n  {fiber}",
        section.thread
    )?;
    match (&fiber.stack, &section.stalled_stack) {
        (Some(stack), _) => stack.write_indented(f, "      ")?,
        (None, Some(Sampled::Missing(why))) => writeln!(f, "      (stack not sampled: {why})")?,
        _ => {}
    }
    if let Some(others) = &section.fibers {
        writeln!(
            f,
            "  and its {} other fibers, read while it held the thread:",
            others.len()
        )?;
        for other in others {
            writeln!(f, "  {other}")?;
            if let Some(stack) = &other.stack {
                stack.write_indented(f, "      ")?;
            }
        }
    }
    if let Some(note) = &section.held_note {
        writeln!(f, "  ({note})")?;
    }
    Ok(())
}
