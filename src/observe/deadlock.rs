//! Deadlocks told: the scheduler finds that every fiber of a runtime waits
//! on fibra's primitives with nothing left to wake one
//! (`scheduler/core/deadlock.rs`, `deadlock_workers.rs`) and hands what it
//! found here ([`Deadlocked`]), where the dump's stacks are named and the
//! WARN (target `fibra::deadlock`) goes to the subscriber, or to stderr
//! when there is none; with `on_deadlock(OnDeadlock::Exit)` the process
//! then ends with status 2, as Go's "all goroutines are asleep" does.

use crate::observe::dump_names;
use crate::report::{self, Level};
use crate::scheduler::core::{Deadlocked, TELL_DEADLOCK};

/// Makes [`tell`] the scheduler's deadlock teller. Called as each
/// runtime's scheduler is made, before it can find a deadlock.
pub(crate) fn install() {
    let _ = TELL_DEADLOCK.get_or_init(|| tell);
}

/// Names the stacks of `found`'s dump and tells it (see the module docs).
fn tell(found: Deadlocked<'_>) {
    let Deadlocked {
        sections,
        on_fiber,
        thread,
        workers,
        fibers,
        waited,
        exit,
        callback,
    } = found;
    let dump = dump_names::resolve(sections, on_fiber);
    let message = match workers {
        None => format!(
            "all {fibers} fibers of thread {thread:?} have waited {waited:.0?} on fibra's \
             locks, channels and joins, with no timer armed and no fd registered: none of \
             them can wake another, so unless a thread outside the runtime wakes one, this \
             is a deadlock"
        ),
        Some(workers) => format!(
            "all {fibers} fibers of the {workers} workers of a runtime have waited \
             {waited:.0?} on fibra's locks, channels and joins, with no timer armed and no \
             fd registered in any worker: none of them can wake another, so unless a \
             thread outside the runtime wakes one, this is a deadlock"
        ),
    };
    let mut to_stderr = false;
    callback(&mut || {
        to_stderr = report::no_subscriber();
        if to_stderr {
            return;
        }
        match workers {
            None => tracing::warn!(
                target: "fibra::deadlock",
                thread,
                fibers,
                waited = ?waited,
                "{message}\n{dump}"
            ),
            Some(workers) => tracing::warn!(
                target: "fibra::deadlock",
                thread,
                workers,
                fibers,
                waited = ?waited,
                "{message}\n{dump}"
            ),
        }
    });
    if to_stderr || exit {
        report::to_stderr(Level::Warn, "fibra::deadlock", &message, Some(&dump));
    }
    if exit {
        report::to_stderr(
            Level::Error,
            "fibra::deadlock",
            "the runtime was built with on_deadlock(OnDeadlock::Exit): exiting with status 2",
            None,
        );
        std::process::exit(2);
    }
}
