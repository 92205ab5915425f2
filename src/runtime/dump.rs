//! Fiber dumps, like Go's goroutine dump: every fiber of a runtime with its
//! id, name, state and what it waits for.
//!
//! A runtime's fibers can only be read on its own thread, so a dump of a
//! runtime running elsewhere (a worker, or any runtime for the SIGQUIT
//! dump) is a message: the runtime answers at its next poll. One that does
//! not answer because a fiber runs without blocking is answered for from
//! what it publishes for the stall watchdog (`runtime::watch`): that fiber,
//! running, and for how long. One that does not answer within
//! [`ANSWER_WITHIN`] otherwise (a runtime nobody drives) is listed as such.

use std::fmt;
use std::panic::Location;
use std::sync::Arc;
use std::time::Duration;

use crate::runtime::core::FiberId;
use crate::runtime::registry;
use crate::runtime::shared::{Remote, Shared};
use crate::sync::mpsc;

/// How long a dump waits for runtimes on other threads to answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// How long a runtime must have run one context without a switch, while a
/// dump waits for it, to be answered for as stalled.
const STALLED_AFTER: Duration = Duration::from_millis(100);

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
}

/// The fibers of one runtime thread.
#[derive(Clone, Debug)]
pub(crate) struct Section {
    /// The thread's name (`fibra-worker-N`, `main`...).
    pub(crate) thread: String,
    /// `None`: the runtime did not answer in time.
    pub(crate) fibers: Option<Vec<FiberInfo>>,
    /// When it did not answer because a context kept its thread: that one.
    pub(crate) stalled: Option<FiberInfo>,
}

/// Every fiber of a runtime, from [`Runtime::dump`](crate::Runtime::dump).
/// Its `Display` prints one line per fiber, grouped by thread.
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
                    }
                }
                None => match &section.stalled {
                    Some(fiber) => writeln!(
                        f,
                        "thread {:?}: did not answer, held by one fiber:\n  {fiber}",
                        section.thread
                    )?,
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

/// Asks each runtime of `targets` (a thread name and its runtime) for its
/// fibers; `local` answers for the one running on the calling thread.
pub(crate) fn collect(
    targets: Vec<(String, Arc<Shared>)>,
    mut local: impl FnMut(&Arc<Shared>) -> Option<Section>,
) -> Dump {
    let (tx, rx) = mpsc::channel();
    let mut sections: Vec<Section> = targets
        .iter()
        .map(|(thread, _)| Section {
            thread: thread.clone(),
            fibers: None,
            stalled: None,
        })
        .collect();
    let mut answered = vec![true; targets.len()];
    let mut words = vec![0; targets.len()];
    let sent = std::time::Instant::now();
    let mut waiting = 0;
    for (i, (_, shared)) in targets.iter().enumerate() {
        match local(shared) {
            Some(section) => sections[i] = section,
            None => {
                let tx = tx.clone();
                answered[i] = false;
                words[i] = shared.watch.word.load(std::sync::atomic::Ordering::Acquire);
                shared.send(Remote::Dump(Box::new(move |section| {
                    let _ = tx.send((i, section));
                })));
                waiting += 1;
            }
        }
    }
    let deadline = sent + ANSWER_WITHIN;
    while waiting > 0 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(left.min(STALLED_AFTER / 2)) {
            Ok((i, section)) => {
                if !answered[i] {
                    answered[i] = true;
                    sections[i] = section;
                    waiting -= 1;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) if sent.elapsed() >= STALLED_AFTER => {
                // Answer for runtimes held by one context all along.
                for (i, (_, shared)) in targets.iter().enumerate() {
                    if answered[i] {
                        continue;
                    }
                    if let Some(info) = stalled(shared, words[i], sent.elapsed()) {
                        answered[i] = true;
                        sections[i].stalled = Some(info);
                        waiting -= 1;
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    Dump { sections }
}

/// The context that has held `shared`'s thread since the dump asked (its
/// word names the same `Meta` as then; the watchdog's mark aside), if one
/// has.
fn stalled(shared: &Shared, word: usize, waited: Duration) -> Option<FiberInfo> {
    if word == 0 {
        return None; // waiting in epoll then: it will answer
    }
    let running = shared.watch.running_now(crate::time::clock::now_ns())?;
    let unmarked = |w: usize| w & !crate::runtime::watch::SEEN;
    if unmarked(shared.watch.word.load(std::sync::atomic::Ordering::Acquire)) != unmarked(word) {
        return None;
    }
    Some(FiberInfo {
        id: running.id,
        name: running.name,
        root: running.root,
        state: FiberState::Running,
        waiting_on: None,
        deadline_in: None,
        running_for: Some(running.running_for.unwrap_or(waited).max(waited)),
        spawned_at: running.location,
        stack_used: None,
    })
}

/// A dump of every runtime of the process, for SIGQUIT.
pub(crate) fn all() -> Dump {
    collect(registry::all(), |_| None)
}

/// Prints a dump of every runtime to stderr whenever the process gets
/// SIGQUIT (Ctrl-\ in a terminal), as Go does, instead of the default of
/// quitting with a core dump. Call once; later calls do nothing.
///
/// # Errors
///
/// When the signal handler or the thread that prints cannot be set up.
///
/// ```no_run
/// fibra::runtime::dump_on_sigquit()?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn dump_on_sigquit() -> std::io::Result<()> {
    static STARTED: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
    if *started {
        return Ok(());
    }
    // Install the handler before returning, so that a SIGQUIT right after
    // this call is caught rather than killing the process.
    crate::signal::install_handler(libc::SIGQUIT)?;
    std::thread::Builder::new()
        .name("fibra-sigquit".into())
        .spawn(|| {
            while crate::signal::wait(&[libc::SIGQUIT]).is_ok() {
                eprintln!("fibra: SIGQUIT: fiber dump\n{}", all());
            }
        })?;
    *started = true;
    Ok(())
}
