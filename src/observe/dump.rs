//! A fiber dump as a user holds it and reads it: the [`Dump`] of the
//! sections the runtimes answered with (`scheduler::fiber_info`), its
//! groups gathered into a tree, and how the dump, a fiber and a group
//! print.

use std::fmt;

use crate::scheduler::fiber_info::{
    ANSWER_WITHIN, FiberInfo, FiberState, GroupId, GroupInfo, Section,
};
use crate::scheduler::stack_trace::Sampled;

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
