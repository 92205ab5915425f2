//! What a runtime publishes for the stall watchdog and for dumps of a
//! runtime that does not answer: which context runs now.
//!
//! ## The word
//!
//! Every switch stores one word in [`Watch::word`]: the address of the
//! incoming context's [`Meta`], which the switch has in a register (one
//! plain store of a line the switch path owns; no read-modify-write, no
//! counter, no lock). Zero means that no fiber code runs: the root waits
//! in `epoll_wait`, or nobody drives the runtime.
//!
//! The watchdog marks what it saw by setting [`SEEN`] in the word (a
//! compare-and-swap, a few times a second, on its side only): a `Meta`
//! address is 16-byte aligned, so the bit is free. The next switch stores a
//! word without it. A word that still has the mark at the next sample
//! names a context that has run all along since the watchdog marked it,
//! without a switch: a stall, when the samples are far apart. (Comparing
//! addresses alone would not do: two fibers taking turns between samples
//! leave the same address behind.)
//!
//! ## Reading the running fiber's [`Meta`]
//!
//! A fiber's `Meta` lives at the top of its stack, right below the stack's
//! header (which holds the fiber's id and name), written before its first
//! switch-in and never changed after (but for its fiber-locals, which only
//! the fiber itself touches: [`Meta::locals`]). Its stack is freed (or
//! given to another fiber) only after the fiber's final switch, by `reap`.
//! It is 32 bytes: where it started, its fiber-locals, and the time it
//! has run (counted only by runtimes built with `Builder::cpu_time`).
//! A reader on another thread reads it under a *hazard*, a Dekker pair:
//!
//! - reader: `hazard = meta` (SeqCst), reload `word` (SeqCst); if it still
//!   names `meta`, read it, then clear `hazard`;
//! - runtime, in `reap`, before the stack goes back (after the final
//!   switch published another word): a fence; while `hazard` names the
//!   fiber's `Meta`, spin ([`Watch::wait_unread`]).
//!
//! The fences are asymmetric where the kernel allows (`membarrier`, see
//! [`init_fences`]): a compiler fence on the runtime's side, which every
//! fiber's exit pays, and `membarrier` on the reader's, a few times a
//! second. Elsewhere both sides use a full fence; the runtime's side then
//! finds `hazard` never clear ([`NO_HAZARD`] is 1 there), so that its one
//! load and branch decide both whether to fence and whether to wait.
//!
//! Either the reader's reload sees the final switch's word (it gives up),
//! or `reap` sees the hazard (it waits the few nanoseconds of the read).
//! The root's `Meta` lives in [`Watch`] itself, which the reader holds by
//! an `Arc`. Readers take [`Watch::read_lock`] so that there is one hazard
//! at a time.

mod meta;
pub(crate) mod starve_record;

use meta::identity;
pub(crate) use meta::{Meta, header_of, meta_below};

use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use crate::scheduler::fiber_id::FiberId;
use crate::scheduler::watch::starve_record::Starve;
use crate::scheduler::watchdog_sleep;

/// Whether the hazard's Dekker pair uses an asymmetric fence: a compiler
/// fence on the runtime's side (every fiber's exit) and `membarrier` on
/// the reader's (a watchdog sample, a dump). Decided once, by the first
/// runtime made in the process, before any fiber exists, and never
/// changed: every runtime and reader sees the same value.
static ASYMMETRIC: AtomicBool = AtomicBool::new(false);

/// Registers this process for `MEMBARRIER_CMD_PRIVATE_EXPEDITED` (Linux
/// ≥ 4.14) once; where that fails, `ASYMMETRIC` stays false and both sides
/// use a full fence.
fn init_fences() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;
        // SAFETY: membarrier takes no pointers; a failure is checked.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0,
                0,
            )
        };
        ASYMMETRIC.store(rc == 0, Ordering::Relaxed);
    });
}

/// Whether the process uses `membarrier` (see [`init_fences`]).
pub(crate) fn asymmetric() -> bool {
    ASYMMETRIC.load(Ordering::Relaxed)
}

/// The heavy half: every thread of the process running now passes a full
/// memory barrier before this returns (and this thread too).
pub(crate) fn heavy_fence() {
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    // SAFETY: membarrier takes no pointers. It cannot fail once this
    // process registered (ASYMMETRIC is set only then); if it did, fall
    // back to a fence of our own, which is all the non-asymmetric path has.
    let rc = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) };
    if rc != 0 {
        std::sync::atomic::fence(Ordering::SeqCst);
    }
}

/// Why a stack is left out of a runtime built with
/// `Builder::stall_stacks(false)`.
pub(crate) const NOT_SIGNALLED: &str =
    "turned off by Builder::stall_stacks(false), which sends its thread no signal";

/// The watchdog's mark in the word: see the module docs.
pub(crate) const SEEN: usize = 1;

/// `Watch::hazard` when no reader reads: 0 with asymmetric fences, else 1
/// (see the module docs).
#[inline(always)]
fn no_hazard() -> usize {
    usize::from(!ASYMMETRIC.load(Ordering::Relaxed))
}

/// The `Meta` address of a word (null for 0).
fn decode(word: usize) -> *const Meta {
    (word & !SEEN) as *const Meta
}

/// A copy of what a `Meta` says, for a report.
#[derive(Clone, Debug)]
pub(crate) struct Running {
    pub(crate) id: FiberId,
    pub(crate) name: Option<String>,
    pub(crate) location: Option<&'static Location<'static>>,
    pub(crate) root: bool,
    /// How long it has run without a switch, as far as anyone saw.
    pub(crate) running_for: Option<Duration>,
}

/// A stall the watchdog warned about and whose end is not told yet.
pub(crate) struct Report {
    /// The word it was seen with (marked [`SEEN`]).
    pub(crate) word: usize,
    pub(crate) running: Running,
    /// When the watchdog first saw it run (ns).
    pub(crate) since: u64,
    /// The watchdog is emitting the first warning: whoever sees the end
    /// meanwhile leaves its time in `ended_at` for the watchdog to tell,
    /// so that the two events come in order.
    pub(crate) emitting: bool,
    pub(crate) ended_at: Option<u64>,
}

/// The watchdog's view of one runtime; in its `Shared`.
#[repr(align(64))]
pub(crate) struct Watch {
    /// See the module docs. Stored by the runtime's thread at every
    /// switch; the watchdog only sets [`SEEN`] in it.
    pub(crate) word: AtomicUsize,
    /// The `Meta` a reader is reading ([`no_hazard`]: none).
    hazard: AtomicUsize,
    /// When the watchdog set [`SEEN`] in the word (ns); written by the
    /// watchdog only, before it sets the mark.
    pub(crate) seen_since: AtomicU64,
    /// The thread's time spent waiting for a CPU (ns, the kernel's
    /// `schedstat`) when the watchdog set [`SEEN`]: time the thread was
    /// preempted is not time its context held it (see [`Watch::run_delay`]).
    pub(crate) seen_delay: AtomicU64,
    /// `/proc/self/task/<tid>/schedstat`, opened at the first look.
    schedstat: std::sync::OnceLock<Option<std::fs::File>>,
    /// How long a context may run before a warning (ns); `u64::MAX`: never.
    pub(crate) threshold_ns: AtomicU64,
    /// Whether a stalled context's stack may be sampled by signalling the
    /// runtime's thread (`Builder::stall_stacks`; see [`Watch::sample`]).
    pub(crate) sample_stacks: AtomicBool,
    /// `report` holds a stall: the runtime tells its end when its root
    /// waits or leaves (a relaxed load on those paths), the watchdog when
    /// it sees the word change.
    pub(crate) pending: AtomicBool,
    pub(crate) report: Mutex<Option<Report>>,
    /// Polls for I/O and timers the runtime has made (stored by its
    /// thread at each poll, a plain store: see `watchdog/starve.rs`).
    pub(crate) polls: AtomicU64,
    /// The watchdog's record of a time without a poll.
    starve: Mutex<Starve>,
    /// The runtime's park count when it last told a deadlock (see
    /// `core/deadlock.rs`; here, off the runtime's hot state: only its
    /// thread touches it).
    pub(crate) deadlock_told: AtomicU64,
    /// Whether a deadlock ends the process (`Builder::on_deadlock`).
    deadlock_exit: AtomicBool,
    read_lock: Mutex<()>,
    /// The kernel's id of the runtime's thread (a `Watch` is made on it),
    /// for a sample of its stack (`observe::sample`).
    pub(crate) tid: libc::pid_t,
    /// The root context's `Meta`, and its id.
    pub(crate) root: Meta,
    root_id: FiberId,
}

// SAFETY: the root `Meta`'s locals are never used (the root uses
// thread-locals); every other field is an atomic, a mutex or plain data.
unsafe impl Sync for Watch {}
// SAFETY: as above.
unsafe impl Send for Watch {}

impl Watch {
    pub(crate) fn new(root_id: FiberId) -> Watch {
        init_fences();
        Watch {
            word: AtomicUsize::new(0),
            hazard: AtomicUsize::new(no_hazard()),
            seen_since: AtomicU64::new(0),
            seen_delay: AtomicU64::new(0),
            schedstat: std::sync::OnceLock::new(),
            threshold_ns: AtomicU64::new(u64::MAX),
            sample_stacks: AtomicBool::new(true),
            pending: AtomicBool::new(false),
            report: Mutex::new(None),
            polls: AtomicU64::new(0),
            starve: Mutex::new(Starve::default()),
            deadlock_told: AtomicU64::new(0),
            deadlock_exit: AtomicBool::new(false),
            read_lock: Mutex::new(()),
            root: Meta::new(None),
            // SAFETY: gettid takes nothing and cannot fail.
            tid: unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t,
            root_id,
        }
    }

    /// How long the runtime's thread has waited for a CPU while runnable
    /// since it started (ns): the second field of the kernel's
    /// `/proc/self/task/<tid>/schedstat`; `None` where the kernel keeps no
    /// such count. A stall is the time a context held its thread *minus*
    /// the time the thread stood preempted meanwhile: on a loaded machine
    /// (another process, a host that steals its guest's CPUs) a fiber that
    /// computes 50 ms between yields can be off a CPU for 200 ms of it,
    /// which is not the fiber's doing. Read by the watchdog only, when it
    /// marks a context and when one has run past the threshold.
    pub(crate) fn run_delay(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let file = self
            .schedstat
            .get_or_init(|| {
                std::fs::File::open(format!("/proc/self/task/{}/schedstat", self.tid)).ok()
            })
            .as_ref()?;
        let mut buf = [0u8; 96];
        let n = file.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        text.split_ascii_whitespace().nth(1)?.parse().ok()
    }

    /// Whether a deadlock ends the process with status 2, as Go's does
    /// (`Builder::on_deadlock(OnDeadlock::Exit)`), rather than only
    /// being told.
    pub(crate) fn exit_on_deadlock(&self) -> bool {
        self.deadlock_exit.load(Ordering::Relaxed)
    }

    pub(crate) fn set_exit_on_deadlock(&self, exit: bool) {
        self.deadlock_exit.store(exit, Ordering::Relaxed);
    }

    /// Whether this runtime's thread may be sent the sampling signal
    /// (not when built with `Builder::stall_stacks(false)`).
    pub(crate) fn sample_stacks(&self) -> bool {
        self.sample_stacks.load(Ordering::Relaxed)
    }

    /// The slot of the stall reported here (taken even if a panicking
    /// holder poisoned it: it holds plain data).
    pub(crate) fn lock_report(&self) -> std::sync::MutexGuard<'_, Option<Report>> {
        self.report.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The watchdog's record of a time without a poll (plain data: taken
    /// even if poisoned).
    pub(crate) fn lock_starve(&self) -> std::sync::MutexGuard<'_, Starve> {
        self.starve.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a poll for I/O and timers: one plain store (only this
    /// runtime's thread writes it), at most once per `BUDGET` switches.
    #[inline(always)]
    pub(crate) fn count_poll(&self) {
        let n = self.polls.load(Ordering::Relaxed);
        self.polls.store(n.wrapping_add(1), Ordering::Relaxed);
    }

    /// The stall reported here has ended, at `at` (ns) or before: takes what
    /// to tell of it (who ran, and for how long in all), unless the first
    /// warning is being emitted (then leaves `at` for its emitter) or
    /// someone took it already. The runtime calls it when its root waits
    /// or leaves, the watchdog when it sees the word change.
    pub(crate) fn take_ended(&self, at: u64) -> Option<(Running, Duration)> {
        let report = {
            let mut slot = self.lock_report();
            if let Some(r) = slot.as_mut()
                && r.emitting
            {
                r.ended_at.get_or_insert(at);
                return None;
            }
            self.pending.store(false, Ordering::Relaxed);
            slot.take()
        }?;
        let total = Duration::from_nanos(at.saturating_sub(report.since));
        Some((report.running, total))
    }

    /// Publishes that `meta` runs: the switch's one store.
    #[inline(always)]
    pub(crate) fn publish(&self, meta: *const Meta) {
        self.word.store(meta as usize, Ordering::Release);
    }

    /// Publishes that the root runs again after a wait, or on entry; wakes
    /// the watchdog if it sleeps because every runtime was idle (see
    /// `watchdog_sleep`): a relaxed load more than [`Watch::publish`].
    #[inline]
    pub(crate) fn publish_busy(&self) {
        self.publish(&self.root);
        // The store above, then the load below, as a Dekker pair with the
        // watchdog's `ASLEEP` store and `membarrier` (see
        // `observe::watchdog::try_sleep`): the compiler must not swap them; the CPU
        // is made to by the watchdog's `membarrier`.
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        if watchdog_sleep::asleep() {
            watchdog_sleep::wake(&self.threshold_ns);
        }
    }

    /// Publishes that no context of the runtime runs.
    #[inline]
    pub(crate) fn publish_idle(&self) {
        self.word.store(0, Ordering::Release);
    }

    /// Called by the runtime before the stack that holds `meta` is given
    /// back or the record that owns its name is vacated, after the
    /// context's final switch, in the context that runs next: waits while
    /// a reader reads it. One load and a branch while no reader reads.
    #[inline(always)]
    pub(crate) fn wait_unread(&self, meta: *const Meta) {
        // The light half of the asymmetric fence (the final switch, which
        // stored the word, already keeps the compiler from moving the load
        // before it): the reader's `membarrier` makes this thread's store
        // of the word visible before the reader reloads it, or makes the
        // reader's hazard visible to the load below (see `init_fences`).
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        if self.hazard.load(Ordering::Relaxed) != 0 {
            self.wait_unread_slow(meta);
        }
    }

    #[cold]
    #[inline(never)]
    fn wait_unread_slow(&self, meta: *const Meta) {
        if !ASYMMETRIC.load(Ordering::Relaxed) {
            // No `membarrier`: the full fence of the Dekker pair is ours.
            std::sync::atomic::fence(Ordering::SeqCst);
        }
        while self.hazard.load(Ordering::SeqCst) == meta as usize {
            std::hint::spin_loop();
        }
    }

    /// What the context named by `word` is, if it still runs (the word,
    /// marked or not, still names its `Meta`).
    pub(crate) fn read(&self, word: usize) -> Option<Running> {
        let meta = decode(word);
        if meta.is_null() {
            return None;
        }
        let _one_reader = self.read_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.hazard.store(meta as usize, Ordering::SeqCst);
        if ASYMMETRIC.load(Ordering::Relaxed) {
            heavy_fence();
        }
        let result = if decode(self.word.load(Ordering::SeqCst)) == meta {
            // It still runs (or runs again: either way it has not made its
            // final switch): its stack (or, for the root, this `Watch`)
            // cannot be given back before the hazard is cleared, by the
            // protocol of the module docs; `Meta`'s immutable fields were
            // written before the switch that stored the word (Release; our
            // load is SeqCst, so Acquire too).
            // SAFETY: as argued above.
            Some(unsafe { self.describe(meta) })
        } else {
            None
        };
        self.hazard.store(no_hazard(), Ordering::Release);
        result
    }

    /// The spawned fiber running on this thread now, for a panic report.
    /// Call on the runtime's own thread only.
    pub(crate) fn running_here(&self) -> Option<Running> {
        let meta = decode(self.word.load(Ordering::Relaxed));
        if meta.is_null() || std::ptr::eq(meta, &self.root) {
            return None;
        }
        // On the runtime's thread, the word names the context running here
        // (or, inside the scheduler, the one being switched out): its record
        // is live, since a record is removed (and its stack given back) by
        // `reap` only after the final switch published another word, and
        // this thread made both stores.
        // SAFETY: as argued above.
        Some(unsafe { self.describe(meta) })
    }

    /// What `meta` and its stack's header say.
    ///
    /// # Safety
    ///
    /// The context of `meta` runs and cannot be reaped before
    /// this returns (it runs on this thread, or its reader holds the
    /// hazard): its stack and record are live. Its `location` and its
    /// header's id and name were written before the switch that published
    /// it (Release; readers load with Acquire or SeqCst, or on the same
    /// thread).
    unsafe fn describe(&self, meta: *const Meta) -> Running {
        let root = std::ptr::eq(meta, &self.root);
        // SAFETY: as the callers promise; `location` never changes.
        let location = unsafe { (&raw const (*meta).location).read() };
        let (id, name) = if root {
            (self.root_id, None)
        } else {
            // SAFETY: as the callers promise; a spawned fiber's `Meta` sits
            // below its stack's header (`Meta`'s invariant).
            unsafe { identity(header_of(meta)) }
        };
        Running {
            id,
            name,
            location,
            root,
            running_for: None,
        }
    }

    /// The context running now and how long the watchdog has seen it run,
    /// for a dump of a runtime that does not answer.
    pub(crate) fn running_now(&self, now_ns: u64) -> Option<Running> {
        let word = self.word.load(Ordering::Acquire);
        let mut running = self.read(word)?;
        if word & SEEN != 0 {
            // `seen_since` was stored before the mark (Release, by the
            // compare-and-swap; our load was Acquire).
            let since = self.seen_since.load(Ordering::Relaxed);
            running.running_for = Some(Duration::from_nanos(now_ns.saturating_sub(since)));
        }
        Some(running)
    }
}

/// Who tells that a stall the watchdog warned about has ended
/// (`observe::watchdog::warn_ended`, set as each runtime is built): the
/// root loop finds the end when the stalled context parks, and hands it up.
pub(crate) static TELL_ENDED: std::sync::OnceLock<fn(&str, &Running, Duration)> =
    std::sync::OnceLock::new();
