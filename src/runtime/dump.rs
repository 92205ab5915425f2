//! Fiber dumps, like Go's goroutine dump: every fiber of a runtime with its
//! id, name, state and what it waits for.
//!
//! A runtime's fibers can only be read on its own thread, so a dump of a
//! runtime running elsewhere (a worker, or any runtime for the SIGQUIT
//! dump) is a message: the runtime answers at its next poll. One that does
//! not answer because a fiber runs without blocking is answered for from
//! what it publishes for the stall watchdog (`scheduler::watch`): that fiber,
//! running, and for how long. One whose fibers keep it busy taking turns
//! without a poll is answered for with what the watchdog sampled of that
//! time (`observe::watchdog::starve`): for how long, and which fibers
//! took most of it. One that does not answer within [`ANSWER_WITHIN`]
//! otherwise (a runtime nobody drives) is listed as such.
//!
//! Each runtime answers with its fibers' stacks as return addresses, walked
//! on its own thread while it stands still (`scheduler::stack_trace`); the
//! thread that asked names them, so a runtime is held up for the walks
//! only, not for the DWARF lookups.

use std::sync::Arc;
use std::time::Duration;

pub(crate) use crate::observe::dump::Dump;
use crate::observe::dump_names;
use crate::observe::held::HeldRead;
use crate::scheduler::fiber_info::{ANSWER_WITHIN, Busy, FiberInfo, FiberState, Section};
use crate::scheduler::shared::{Remote, Shared};
use crate::scheduler::stack_trace::Sampled;
use crate::scheduler::stack_trace::walk::RawStack;
use crate::scheduler::{context, registry};
use crate::sync::mpsc;

/// How long a runtime must have run one context without a switch, while a
/// dump waits for it, to be answered for as stalled.
const STALLED_AFTER: Duration = Duration::from_millis(100);

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
            stalled_stack: None,
            held_note: None,
            busy: None,
            stacks: Vec::new(),
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
                    if let Some((info, stack, others)) = stalled(shared, words[i]) {
                        answered[i] = true;
                        let section = &mut sections[i];
                        section.stalled = Some(info);
                        section.stalled_stack = Some(stack);
                        match others {
                            Ok((fibers, stacks, unlisted)) => {
                                section.fibers = Some(fibers);
                                section.stacks = stacks;
                                section.held_note = (unlisted > 0)
                                    .then(|| format!("{unlisted} more fibers not listed"));
                            }
                            Err(why) => {
                                section.held_note =
                                    Some(format!("its other fibers are not listed: {why}"));
                            }
                        }
                        waiting -= 1;
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // Runtimes still running fibers at the end: what kept them busy.
    for (i, (_, shared)) in targets.iter().enumerate() {
        if !answered[i] {
            sections[i].busy = busy(shared);
        }
    }
    dump_names::resolve(sections, context::in_fiber())
}

/// What keeps `shared`'s runtime from answering, if it runs fibers: the
/// watchdog's record of its time without a poll, and who runs now.
fn busy(shared: &Shared) -> Option<Busy> {
    let now = crate::timer::clock::now_ns();
    let running = shared.watch.running_now(now);
    let starved = shared.watch.starved_now(now);
    if running.is_none() && starved.is_none() {
        return None; // waiting for events, or nobody drives it
    }
    Some(Busy {
        starved,
        running: running
            .map(|r| crate::scheduler::fiber_id::describe(r.id, r.name.as_deref(), r.root)),
    })
}

/// The context that has held `shared`'s thread since the dump asked (its
/// word names the same `Meta` as then; the watchdog's mark aside), if one
/// has.
fn stalled(shared: &Shared, word: usize) -> Option<(FiberInfo, Sampled, HeldFibers)> {
    if word == 0 {
        return None; // waiting in epoll then: it will answer
    }
    let running = shared.watch.running_now(crate::timer::clock::now_ns())?;
    let unmarked = |w: usize| w & !crate::scheduler::watch::SEEN;
    if unmarked(shared.watch.word.load(std::sync::atomic::Ordering::Acquire)) != unmarked(word) {
        return None;
    }
    // Held all along as the watchdog saw it (its mark has stayed for
    // `STALLED_AFTER`): the same word alone may be fibers that take turns
    // and leave it behind now and then (see `busy`).
    let held = running.running_for.filter(|r| *r >= STALLED_AFTER)?;
    // Where it is now: sampled while the word still has the watchdog's
    // mark (no switch since).
    let marked = shared.watch.word.load(std::sync::atomic::Ordering::Acquire);
    // Its other fibers, read while the sample holds the thread.
    let meta = marked & !crate::scheduler::watch::SEEN;
    let mut others = HeldRead::prepare(shared.watch.tid, meta);
    let stack = crate::observe::sample::of_holding(&shared.watch, marked, &mut || others.read());
    let others = others.finish(crate::timer::clock::now_ns());
    let info = FiberInfo {
        id: running.id,
        name: running.name,
        root: running.root,
        state: FiberState::Running,
        waiting_on: None,
        deadline_in: None,
        running_for: Some(held),
        spawned_at: running.location,
        stack_used: None,
        cpu_time: None,
        stack: None,
        // (The fiber layer's map of members is on that thread.)
        group: None,
        in_group: None,
    };
    Some((info, stack, others))
}

/// What [`HeldRead::finish`] gives: the other fibers of a held runtime,
/// their stacks, and how many were left out; or why there are none.
type HeldFibers = Result<(Vec<FiberInfo>, Vec<(usize, RawStack)>, usize), &'static str>;

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
    crate::scheduler::helper::spawn_quiet(|| {
        std::thread::Builder::new()
            .name("fibra-sigquit".into())
            .spawn(|| {
                while crate::signal::wait(&[libc::SIGQUIT]).is_ok() {
                    eprintln!("fibra: SIGQUIT: fiber dump\n{}", all());
                }
            })
    })?;
    *started = true;
    Ok(())
}
