//! What a fiber dump says: a [`FiberInfo`] per fiber, a `Section` per
//! runtime, and the [`Dump`] of them, as it prints. How one is collected
//! from runtimes on other threads is `dump.rs`.

use std::fmt;
use std::panic::Location;
use std::time::Duration;

use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::stack_trace::sample::Sampled;
use crate::scheduler::stack_trace::walk::RawStack;
use crate::scheduler::stack_trace::{Resolver, StackTrace};
use crate::scheduler::watchdog::starve::Starved;

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
}

/// The fibers of one runtime thread.
#[derive(Clone, Debug)]
pub(crate) struct Section {
    /// The thread's name (`fibra-worker-N`, `main`...).
    pub(crate) thread: String,
    /// `None`: the runtime did not answer in time.
    pub(crate) fibers: Option<Vec<FiberInfo>>,
    /// When it did not answer because a context kept its thread: that one,
    /// and its stack as sampled while it ran (named into its
    /// [`FiberInfo::stack`] by [`Dump::resolve`]), or why there is none.
    pub(crate) stalled: Option<FiberInfo>,
    pub(crate) stalled_stack: Option<Sampled>,
    /// When it did not answer because its fibers kept it busy, taking
    /// turns without a poll: for how long, and which took most of it.
    pub(crate) busy: Option<Busy>,
    /// The return addresses of the listed fibers' stacks, by their index
    /// in `fibers`, as the runtime took them; [`Dump::resolve`] names them
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
/// Its `Display` prints one line per fiber, grouped by thread, each with
/// its stack under it (see [`FiberInfo::stack`]):
///
/// ```text
/// thread "main": 2 fibers
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
}

impl Dump {
    /// The dump of `sections`, with their stacks named (the slow part of a
    /// dump: DWARF lookups, each address once).
    ///
    /// On a fiber, that is done on a thread of its own, which the fiber
    /// waits for (as the whole dump blocks its runtime): the symbolizer is
    /// not made for a fiber's stack, which may be 16 KiB.
    pub(crate) fn resolve(mut sections: Vec<Section>) -> Dump {
        let resolve_all = |sections: &mut Vec<Section>| {
            let mut resolver = Resolver::default();
            for section in sections {
                let stacks = std::mem::take(&mut section.stacks);
                let Some(fibers) = &mut section.fibers else {
                    continue;
                };
                for (i, raw) in stacks {
                    if let Some(fiber) = fibers.get_mut(i) {
                        fiber.stack = Some(resolver.resolve(&raw));
                    }
                }
            }
        };
        // (A stalled fiber's sampled stack is named here, off any fiber.)
        let mut resolver = Resolver::default();
        for section in &mut sections {
            if let (Some(fiber), Some(Sampled::Stack(raw))) =
                (&mut section.stalled, &section.stalled_stack)
            {
                fiber.stack = Some(resolver.resolve(raw));
            }
        }
        if sections.iter().all(|s| s.stacks.is_empty()) {
            // Nothing to name.
        } else if crate::scheduler::context::current()
            .is_some_and(|core| core.current_key() != crate::scheduler::core::ROOT)
        {
            let named = std::thread::scope(|s| {
                crate::scheduler::helper::spawn_quiet(|| {
                    std::thread::Builder::new()
                        .name("fibra-dump".into())
                        .spawn_scoped(s, || resolve_all(&mut sections))
                })
                .map(|named| named.join())
            });
            match named {
                Ok(Ok(())) => {}
                Ok(Err(panic)) => std::panic::resume_unwind(panic),
                // No thread to be had: the stacks are left out.
                Err(_) => sections.iter_mut().for_each(|s| s.stacks.clear()),
            }
        } else {
            resolve_all(&mut sections);
        }
        Dump { sections }
    }

    /// Every fiber listed, from all threads that answered.
    pub fn fibers(&self) -> impl Iterator<Item = &FiberInfo> {
        self.sections
            .iter()
            .flat_map(|s| s.fibers.iter().flatten().chain(&s.stalled))
    }

    /// Whether every runtime thread answered in time.
    pub fn is_complete(&self) -> bool {
        self.sections.iter().all(|s| s.fibers.is_some())
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
        if let Some(at) = self.spawned_at {
            write!(f, " spawned at {at}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Dump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for section in &self.sections {
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
                None => match (&section.stalled, &section.busy) {
                    (Some(fiber), _) => {
                        writeln!(
                            f,
                            "thread {:?}: did not answer, held by one fiber:\n  {fiber}",
                            section.thread
                        )?;
                        match (&fiber.stack, &section.stalled_stack) {
                            (Some(stack), _) => stack.write_indented(f, "      ")?,
                            (None, Some(Sampled::Missing(why))) => {
                                writeln!(f, "      (stack not sampled: {why})")?
                            }
                            _ => {}
                        }
                    }
                    (None, Some(busy)) => {
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
                    (None, None) => writeln!(
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
