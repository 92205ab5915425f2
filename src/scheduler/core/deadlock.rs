//! Deadlocks told, as Go's "all goroutines are asleep - deadlock!": a
//! runtime about to wait for events without end, all of whose contexts
//! (the root too, when it runs `block_on`'s closure) are parked on fibra's
//! own primitives — locks, condvars, channels, semaphores, joins, a
//! scope's end — with no timer armed and no fd registered, has nothing
//! left that can wake one of its fibers but another thread. When it has
//! waited so for ten times its `stall_warning`, it emits a WARN (target
//! `fibra::deadlock`) with its dump and the stacks in it. A warning, not a
//! panic: a plain thread (or a fiber of another runtime) may still unlock,
//! send or unpark.
//!
//! Only on the way into a wait without a timeout, where the runtime would
//! otherwise sleep until an event: the look is a few tests (timers, fds,
//! queues) and, when they all pass, one pass over the records; nothing on
//! the switch, park or spawn paths. This file is a current-thread
//! runtime's: a worker of a runtime of several may wait on fibers of its
//! siblings, which it cannot see run, so the workers agree on it together
//! (`deadlock_workers.rs`, `pool/quiet.rs`).

use std::sync::OnceLock;

use super::*;
use crate::scheduler::wait_on::WaitOn;

/// A deadlock a runtime found, handed to the layer above that names its
/// stacks and tells it (`observe::deadlock`, which sets [`TELL`] as each
/// runtime is built): the scheduler finds, the observer tells.
pub(crate) struct Deadlocked<'a> {
    /// The runtime's dump: one section per worker (one for a
    /// current-thread runtime), stacks walked but not named.
    pub(crate) sections: Vec<Section>,
    /// Whether the runtime found it on a fiber's stack, where names are
    /// not looked up (see `observe::dump_names`).
    pub(crate) on_fiber: bool,
    /// The name of the thread that found it.
    pub(crate) thread: &'a str,
    /// How many workers the runtime has; `None`: a current-thread runtime.
    pub(crate) workers: Option<usize>,
    /// How many fibers wait.
    pub(crate) fibers: u64,
    /// How long they have all waited.
    pub(crate) waited: std::time::Duration,
    /// `on_deadlock(OnDeadlock::Exit)`: the teller ends the process.
    pub(crate) exit: bool,
    /// Runs subscriber code (the event) as the scheduler runs it: aborting
    /// if it unwinds, with a hooked blocking call blocking the thread (see
    /// `Core::callback`).
    pub(crate) callback: &'a dyn Fn(&mut dyn FnMut()),
}

/// Who tells a deadlock: set once, before any runtime runs.
pub(crate) static TELL: OnceLock<fn(Deadlocked<'_>)> = OnceLock::new();

/// How many `stall_warning`s a runtime waits, deadlocked, before it says so.
const AFTER_STALLS: u64 = 10;

impl Core {
    /// The root's wait when no fiber is ready: [`Core::poll`] without a
    /// timeout, unless the runtime looks deadlocked (see the module docs):
    /// then it waits [`AFTER_STALLS`] stall thresholds first, and warns if
    /// nothing happened meanwhile. Out of line, as the `poll` it stands
    /// for was: the root loop's code stays as it was.
    #[inline(never)]
    pub(super) fn wait_for_events(&self) {
        let Some(after) = self.deadlock_suspect() else {
            self.poll(None);
            return;
        };
        let start = clock::now_ns();
        loop {
            let waited = clock::now_ns().saturating_sub(start);
            if waited >= after {
                break;
            }
            self.poll(Some(std::time::Duration::from_nanos(after - waited)));
            if self.has_ready() || self.deadlock_suspect().is_none() {
                return; // something happened
            }
        }
        // SAFETY: on the runtime's thread; short borrow.
        let seq = unsafe { self.local() }.park_seq;
        let told = &self.shared.watch.deadlock_told;
        if told.swap(seq, std::sync::atomic::Ordering::Relaxed) != seq {
            self.warn_deadlock(std::time::Duration::from_nanos(after));
        }
        self.poll(None);
    }

    /// How long to wait before a deadlock is told, if every context of the
    /// runtime is parked on fibra's primitives with no timer armed and no
    /// fd registered; `None` otherwise, or when the runtime has no stall
    /// warning. A current-thread runtime's: a worker's is
    /// `deadlock_workers.rs`.
    fn deadlock_suspect(&self) -> Option<u64> {
        if self.worker.is_some() {
            return None;
        }
        let after = self.deadlock_after()?;
        (self.parked_on_primitives()? > 0).then_some(after)
    }

    /// How long a runtime waits, deadlocked, before it says so: its
    /// `stall_warning` × [`AFTER_STALLS`]; `None` when it has no warning.
    pub(super) fn deadlock_after(&self) -> Option<u64> {
        let threshold = self
            .shared
            .watch
            .threshold_ns
            .load(std::sync::atomic::Ordering::Relaxed);
        (threshold != u64::MAX).then(|| threshold.saturating_mul(AFTER_STALLS))
    }

    /// How many fibers of this scheduler wait on fibra's primitives, if
    /// every one does (the root in its loop aside) with nothing ready, no
    /// timer armed and no fd registered; `None` otherwise. The cheap tests
    /// first (a server has an fd registered), then one pass over the
    /// records.
    pub(super) fn parked_on_primitives(&self) -> Option<u64> {
        // SAFETY: on the runtime's thread; short borrow, no user code.
        let l = unsafe { self.local() };
        if l.reactor.has_waiters()
            || !l.timers.is_empty()
            || !l.run_queue.is_empty()
            || !l.idle_queue.is_empty()
            || l.closing
        {
            return None;
        }
        let mut parked = 0;
        for (key, rec) in l.fibers.iter() {
            match rec.state {
                State::Parked => {}
                // The root in its loop, running no user code (`run`).
                State::Running if key == ROOT => continue,
                _ => return None,
            }
            match rec.waiting_on.get() {
                Some(WaitOn::Sync(_) | WaitOn::Join(_) | WaitOn::Scope) => parked += 1,
                // A sleep, an fd, a signal, a future's waker, the blocking
                // pool: something outside may end it.
                _ => return None,
            }
        }
        Some(parked)
    }

    /// Emits the deadlock WARN, with the runtime's dump and stacks.
    ///
    /// Published idle meanwhile, as a wait is: the watch word names the
    /// root's context while the root loop runs, and the watchdog cannot
    /// tell the loop from `block_on`'s closure; the loop's own work between
    /// two waits takes microseconds, but naming the dump's stacks loads the
    /// debug info the first time in a process (tens of ms in a release
    /// build, hundreds in a debug one, seconds under a sanitizer), which
    /// the watchdog took for a stall of the closure, parked in a join all
    /// along. It is the runtime's own work while no context can run, done
    /// where it would otherwise wait. (Naming on the `fibra-symbols` thread
    /// instead, as the stall warning does, would leave this thread waiting
    /// for the names to emit the event with them: the same idle time, a
    /// thread hop more.)
    #[cold]
    #[inline(never)]
    fn warn_deadlock(&self, waited: std::time::Duration) {
        if !self.deadlock_heard() {
            return; // no dump walked or named
        }
        self.shared.watch.publish_idle();
        self.emit_deadlock(waited);
        self.publish_root_running();
    }

    /// Whether anyone hears the deadlock WARN: a subscriber that listens
    /// to it, stderr when no subscriber is set (`report`), or the exit of
    /// [`OnDeadlock::Exit`](crate::runtime::OnDeadlock::Exit).
    /// The dump it carries is made only then (a subscriber's code, so
    /// through [`Core::callback`]).
    pub(super) fn deadlock_heard(&self) -> bool {
        self.shared.watch.exit_on_deadlock()
            || self.callback("event", || {
                crate::report::no_subscriber()
                    || tracing::enabled!(target: "fibra::deadlock", tracing::Level::WARN)
            })
    }

    /// [`Core::warn_deadlock`]'s body: this runtime's section, told by
    /// the layer above (see [`Deadlocked`]).
    fn emit_deadlock(&self, waited: std::time::Duration) {
        let section = self.dump_section(false);
        let fibers = section.fibers.as_ref().map_or(0, Vec::len) as u64;
        self.tell_deadlock(vec![section], None, fibers, waited);
    }

    /// Hands a deadlock found by this runtime (of one thread or several)
    /// to the teller the layer above set ([`TELL`]), with the sections of
    /// its dump, their stacks not yet named. Subscriber code the teller
    /// runs goes through [`Core::callback`].
    pub(super) fn tell_deadlock(
        &self,
        sections: Vec<Section>,
        workers: Option<usize>,
        fibers: u64,
        waited: std::time::Duration,
    ) {
        let Some(tell) = TELL.get() else {
            return; // no runtime was built through `runtime::Builder`
        };
        tell(Deadlocked {
            sections,
            on_fiber: self.current_key() != ROOT,
            thread: self.shared.thread_name.as_str(),
            workers,
            fibers,
            waited,
            exit: self.shared.watch.exit_on_deadlock(),
            callback: &|f| self.callback("event", f),
        });
    }
}
