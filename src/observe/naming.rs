//! Naming a sampled stack for the stall warning without holding up the
//! watchdog. Two threads of their own, made at the first stall:
//!
//! - `fibra-symbols` looks names up. The first lookup of a process loads
//!   the debug info of each object the stack runs through (the program,
//!   libc), which takes long in a large debug build: 0.1–0.2 s each on the
//!   development VM, seconds under a sanitizer or where the `backtrace`
//!   crate is built without optimisation.
//! - `fibra-teller` tells the stall warnings, in the order they were
//!   handed over ([`tell_in_order`]): a warning whose stack is being named
//!   waits for the names up to [`NAMING`], then goes with the addresses
//!   and says why; the names, when they come, are told after it (see
//!   [`name_within`]). The end of a stall, handed over after its start, is
//!   told after it.
//!
//! So the watchdog hands a warning over and goes on watching every other
//! runtime at once (it used to wait for the names itself, and a round of
//! its looks took that much longer: a mark dated before it counted the
//! wait as the marked fiber's run). The bound keeps a warning timely while
//! the first lookups load the debug info, and from waiting forever on a
//! lookup that cannot finish (the stalled thread holds the symbolizer's
//! lock, say); the lookup goes on, tells its names late, and serves the
//! next warnings.

use std::fmt::Write as _;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use crate::observe::resolve::Resolver;
use crate::scheduler::stack_trace::walk::RawStack;

type Job = Box<dyn FnOnce() + Send>;

/// How long a warning waits for its stack's names before it is told with
/// the addresses: a warning must come while the stall lasts (a program
/// that hangs is told so while it hangs), and most stalls are short.
pub(crate) const NAMING: Duration = Duration::from_millis(250);

/// Runs `tell` on the teller thread after everything handed over before
/// it (or here, if there is no thread to be had).
pub(crate) fn tell_in_order(tell: impl FnOnce() + Send + 'static) {
    static TELLER: OnceLock<Option<Mutex<mpsc::Sender<Job>>>> = OnceLock::new();
    if let Err(job) = queue(&TELLER, "fibra-teller", Box::new(tell)) {
        job();
    }
}

/// The text of `raw`'s frames, named if that is done within `within`;
/// otherwise the addresses, and `late` is told the names once they come
/// (on the teller thread, after what was handed to it meanwhile): the
/// first warning of a large debug build, whose debug info takes longer
/// than `within` to load, is still followed by its stack's names.
pub(crate) fn name_within(
    raw: RawStack,
    within: Duration,
    late: impl FnOnce(String) + Send + 'static,
) -> String {
    let mut addresses = String::new();
    for ip in raw.ips.iter() {
        let _ = write!(addresses, " {ip:#x}");
    }
    let slot = Arc::new(Late {
        state: Mutex::new(Naming::Waiting),
        named: Condvar::new(),
    });
    let theirs = slot.clone();
    let job: Job = Box::new(move || {
        let named = Resolver::default().resolve(&raw).to_string();
        let mut state = theirs.lock();
        match std::mem::replace(&mut *state, Naming::Told) {
            Naming::Late(late) => {
                drop(state);
                tell_in_order(move || late(named));
            }
            _ => {
                *state = Naming::Named(named);
                theirs.named.notify_one();
            }
        }
    });
    if let Err(job) = send(job) {
        // No thread to be had: named here, however long it takes.
        job();
    }
    let state = slot.lock();
    let (mut state, _) = slot
        .named
        .wait_timeout_while(state, within, |s| matches!(s, Naming::Waiting))
        .unwrap_or_else(|e| e.into_inner());
    match std::mem::replace(&mut *state, Naming::Told) {
        Naming::Named(named) => named,
        _ => {
            *state = Naming::Late(Box::new(late));
            format!(
                "(not named within {within:?}: the debug info is still loading, and the \
                 names follow once it is; the addresses:{addresses})"
            )
        }
    }
}

/// Where the names of a stack meet the warning that waits for them.
struct Late {
    state: Mutex<Naming>,
    named: Condvar,
}

enum Naming {
    /// Neither side is done.
    Waiting,
    /// Named in time: the warning takes them.
    Named(String),
    /// The warning went without them: whoever names them tells this.
    Late(Box<dyn FnOnce(String) + Send>),
    /// Taken.
    Told,
}

impl Late {
    /// The state (plain data: taken even if a panicking holder poisoned it).
    fn lock(&self) -> std::sync::MutexGuard<'_, Naming> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Queues `job` for the naming thread (made on first use); gives it back
/// if there is none.
fn send(job: Job) -> Result<(), Job> {
    static JOBS: OnceLock<Option<Mutex<mpsc::Sender<Job>>>> = OnceLock::new();
    queue(&JOBS, "fibra-symbols", job)
}

/// Queues `job` for the thread named `name` behind `jobs` (made on first
/// use); gives it back if there is none.
fn queue(
    jobs: &'static OnceLock<Option<Mutex<mpsc::Sender<Job>>>>,
    name: &'static str,
    job: Job,
) -> Result<(), Job> {
    let jobs = jobs.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        crate::scheduler::helper::spawn_quiet(|| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
        })
        .ok()
        .map(|_| Mutex::new(tx))
    });
    match jobs {
        Some(tx) => tx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(job)
            .map_err(|e| e.0),
        None => Err(job),
    }
}
