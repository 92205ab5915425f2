//! Fiber dumps, like Go's goroutine dump: every fiber of a runtime with its
//! id, name, state and what it waits for.
//!
//! A runtime's fibers can only be read on its own thread, so a dump of a
//! runtime running elsewhere (a worker, or any runtime for the SIGQUIT
//! dump) is a message: the runtime answers at its next poll. One that does
//! not answer within [`ANSWER_WITHIN`] (a fiber computing without ever
//! blocking, or a current-thread runtime nobody drives) is listed as such.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::runtime::core::FiberId;
use crate::runtime::registry;
use crate::runtime::shared::{Remote, Shared};
use crate::sync::mpsc;

/// How long a dump waits for runtimes on other threads to answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(1);

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
}

/// The fibers of one runtime thread.
#[derive(Clone, Debug)]
pub(crate) struct Section {
    /// The thread's name (`fibra-worker-N`, `main`...).
    pub(crate) thread: String,
    /// `None`: the runtime did not answer in time.
    pub(crate) fibers: Option<Vec<FiberInfo>>,
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
        self.sections.iter().flat_map(|s| s.fibers.iter().flatten())
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
            FiberState::Ready => f.write_str(" [ready]"),
            FiberState::Running => f.write_str(" [running]"),
            FiberState::Parked => {
                f.write_str(" [parked")?;
                if let Some(on) = &self.waiting_on {
                    write!(f, ": {on}")?;
                }
                if let Some(left) = self.deadline_in {
                    write!(f, ", {left:.1?} left")?;
                }
                f.write_str("]")
            }
        }
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
                None => writeln!(
                    f,
                    "thread {:?}: did not answer within {ANSWER_WITHIN:?} (a fiber \
                     running without blocking, or a runtime nobody drives)",
                    section.thread
                )?,
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
        })
        .collect();
    let mut waiting = 0;
    for (i, (_, shared)) in targets.iter().enumerate() {
        match local(shared) {
            Some(section) => sections[i] = section,
            None => {
                let tx = tx.clone();
                shared.send(Remote::Dump(Box::new(move |section| {
                    let _ = tx.send((i, section));
                })));
                waiting += 1;
            }
        }
    }
    let deadline = std::time::Instant::now() + ANSWER_WITHIN;
    while waiting > 0 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, section)) => {
                sections[i] = section;
                waiting -= 1;
            }
            Err(_) => break,
        }
    }
    Dump { sections }
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
