//! The per-thread scheduler: fiber records, the run queue, park and wake,
//! and the only place where contexts are switched.
//!
//! ## The root context
//!
//! Besides its fibers, a runtime has one *root* context: the thread's own
//! stack, in whatever code called `block_on`, `run`, `turn` or dropped the
//! runtime. It has a record like a fiber (key [`ROOT`]), so `block_on`'s
//! closure can park, sleep and join exactly like a fiber while running on the
//! thread's stack, where it may borrow anything and recurse deeply.
//!
//! The root also runs the poll loop ([`Core::run_root`]). Fibers switch to
//! each other directly: a fiber that parks or yields resumes the next ready
//! fiber itself, without passing through a scheduler context, so a yield
//! round trip between two fibers costs two switches. Control returns to the
//! root only when the run queue is empty (time to wait in epoll) or when
//! [`BUDGET`] fibers have run since the root last polled, so I/O and timers
//! are polled regularly even under a busy yield loop.
//!
//! ## Park tokens
//!
//! Every park has a sequence number, unique within the runtime. A
//! [`WakeToken`] names a fiber and the park it is meant for; waking with a
//! token of a park that has ended (or of a fiber that is gone and whose slot
//! was reused) does nothing, so stale timers, reactor events and unparkers
//! from other threads can never wake the wrong park. A token taken by a
//! running fiber is for its *next* park: waking with it before the fiber
//! parks makes that park return at once (like `std::thread::park`'s token).
//! Whoever takes a token must park on it before parking on anything else,
//! or retire it ([`Core::retire_token`]) if it turns out not to park while
//! its waker may still fire.
//!
//! ## Ground rules
//!
//! - All state but [`Shared`] is touched only on the runtime's thread,
//!   through [`Core::local`], in short borrows: a `&mut Local` (or a
//!   reference into it, such as a `&mut Record`) is never held across a
//!   switch, nor across a call into user code — a `tracing` subscriber's
//!   callback, a user value's `Drop`, a waker. Such code may re-enter the
//!   runtime (spawn, which may grow the record slab and move every record;
//!   wake; cancel; log), so what it needs is copied out first and the
//!   caller re-borrows by key after it: see [`Core::callback`], the one
//!   door through which the scheduler calls a subscriber. Other fibers run
//!   between the two halves of a switch, so the same holds there.
//! - The place a switch saves the outgoing stack pointer to (a field of
//!   its record, in the slab) is taken after the last callback before the
//!   switch and used at once by `arch::switch`, with no user code in
//!   between: it cannot have moved. The incoming one's is read then too.
//! - A fiber runs only while its runtime is entered on this thread (the
//!   `CONTEXT` thread-local points at its `Core`), and the `Core` outlives
//!   every fiber: dropping the runtime cancels and finishes them first.
//! - A record is removed only by the context that resumes after the fiber's
//!   final switch ([`Core::after_switch`]): a fiber cannot free the stack it
//!   is running on.

use std::cell::UnsafeCell;
use std::num::NonZeroU64;
use std::sync::Arc;

use crate::arch;
use crate::reactor::token::{Key, WakeToken};
use crate::reactor::{Polled, Reactor};
use crate::scheduler::blocks::Blocks;
use crate::scheduler::fiber_info::{FiberInfo, FiberState, Section};
use crate::scheduler::pool::WorkerLink;
use crate::scheduler::registry::{self, RuntimeId};
use crate::scheduler::run_queue::RunQueue;
use crate::scheduler::shared::{DumpAnswer, Remote, Shared};
use crate::scheduler::wait_on::{StoredWait, WaitOn};
use crate::scheduler::watch::Meta;
use crate::stack::{self, Spare, Stack, overflow};
use crate::timer::clock;
use crate::timer::wheel::{Fired, Wheel};

/// The slot of the root context (the thread's own stack).
pub(crate) const ROOT: Key = 0;

/// How many fibers may run, switching directly from one to the next, before
/// control returns to the root to poll for I/O, timers and remote wake-ups.
/// Polling costs at least a clock read and often an `epoll_wait`; 128
/// switches keep it under a few percent of a yield loop while bounding the
/// I/O latency a busy loop adds.
pub(crate) const BUDGET: u32 = 128;

/// How many socket calls in a row a fiber may make without parking before
/// it yields to the others: a connection whose data is always there would
/// otherwise keep its fiber running and starve every other fiber, timer
/// and I/O poll of the thread (tokio's cooperative budget is 128 too).
const IO_BUDGET: u32 = 128;

/// How long the runtime must expect to sleep before it releases the memory
/// of pooled stacks (see `stack::release_pending`).
const IDLE_RELEASE_NS: u64 = 5_000_000;

pub(crate) mod callback;
mod current;
mod deadlock;
pub(crate) use deadlock::{Deadlocked, TELL as TELL_DEADLOCK};
mod deadlock_workers;
mod dump;
pub(crate) mod first_frame;
mod first_run;
mod flags;
pub(crate) mod job;
pub(crate) mod record;
pub(crate) mod records;
mod root;
mod share_cpu;
mod shutdown;
mod switch;
mod wake;
mod worker;

use callback::parked_in_callback;
use flags::Flags;
use job::Job;
// Also `fibra::FiberId` (through `fiber`); the runtime takes it from
// `fiber_id`.
pub use crate::scheduler::fiber_id::FiberId;
use record::{NO_DEADLINE, Record, State, TimeoutScope, Wake};
use records::Records;

/// The settings of a runtime's schedulers that its `Builder` chose.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tuning {
    /// When the watchdog warns about a fiber that runs without parking.
    pub(crate) stall: std::time::Duration,
    /// How long to poll without sleeping before a wait.
    pub(crate) busy_poll: std::time::Duration,
    /// Whether the watchdog may signal the runtime's thread to sample a
    /// stalled fiber's stack (`Builder::stall_stacks`).
    pub(crate) stall_stacks: bool,
    /// Whether a deadlock ends the process (`Builder::on_deadlock`).
    pub(crate) exit_on_deadlock: bool,
    /// Whether switches count each fiber's time (`Builder::cpu_time`).
    pub(crate) count_time: bool,
}

/// How long [`Core::run_root`] runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Until {
    /// Until the root itself is woken (it parked in `block_on`'s closure).
    RootWoken,
    /// Until no fiber is left.
    NoFibers,
    /// Until the budget set by the caller is spent or nothing is ready.
    BatchDone,
    /// Until the runtime of workers this core belongs to is dropped.
    Stopped,
}

/// Laid out by hand (`repr(C)`), what a turn of a busy server reads and
/// writes first: its scalars, the records, the queues, the reactor (whose
/// own hot fields lead it), then the timer wheel and what only spawns,
/// exits, timers and messages use. In the compiler's order, by size, the
/// fields a round trip touches were spread over most of its 15 lines: laid
/// out so, an echo trip touches 2.9 fewer lines of the heap at one
/// connection and 2.2 fewer data lines at 1 000 (`footprint.sh` with
/// `DATA_BY=n`). Drop order (the declaration order) keeps the records
/// before the reactor, and both before the messages, spare stacks and
/// blocks, as before.
#[repr(C)]
pub(crate) struct Local {
    // ---- what every turn and switch touches
    /// The context running now.
    pub(crate) current: Key,
    /// Fibers that may still run before control returns to the root.
    budget: u32,
    park_seq: u64,
    /// Switches into fibers, for `turn`'s count.
    pub(crate) resumed: u64,
    /// Whether switches count each context's time (`Builder::cpu_time`),
    /// and the time-stamp counter at the last switch (see
    /// `scheduler::cpu_time`).
    pub(crate) count_time: bool,
    pub(crate) switched_at: u64,
    io_since: u64,
    /// Socket calls since `resumed` was `io_since` (see [`IO_BUDGET`]).
    io_calls: u32,
    /// Inside `block_on`, `run`, `turn` or drop.
    pub(crate) entered: bool,
    /// Being dropped: new fibers start cancelled.
    pub(crate) closing: bool,
    /// The subscriber callback running now, if any (see
    /// [`Core::callback`]): a park or yield then is a misuse.
    pub(crate) in_callback: Option<&'static str>,
    /// When the thread last gave up its CPU (see `core/share_cpu.rs`).
    cpu_share: share_cpu::CpuShare,
    pub(crate) fibers: Records,
    run_queue: RunQueue,
    /// Idle fibers that are ready (see `Builder::idle`).
    pub(crate) idle_queue: RunQueue,
    io_ready: Vec<WakeToken>,
    /// Spawned fibers that have not finished.
    pub(crate) live: usize,
    pub(crate) reactor: Reactor,
    // ---- what timers, spawns, exits and messages touch
    pub(crate) timers: Wheel<WakeToken>,
    fired: Vec<Fired<WakeToken>>,
    /// Maps of fiber-locals alive (see `fiber::local`).
    pub(crate) fiber_locals: usize,
    /// Fibers next to have their first frame built whose stack's top page
    /// the last look of `populate_ahead` (see `core/first_run.rs`) covered.
    populated_ahead: u32,
    /// Contexts suspended in the middle of unwinding. Each makes
    /// `std::thread::panicking()` true for every context of the thread (the
    /// panic count is per thread, not per fiber).
    pub(crate) unwinding_suspended: usize,
    remote: Vec<Remote>,
    /// Dump requests taken from the remote queue, answered at the end of
    /// the turn (kept here, not in the turn's frame: a turn without
    /// messages has nothing to drop).
    dumps: Vec<DumpAnswer>,
    /// Free stacks of the default size, reused before the thread's pool.
    spare: Spare,
    /// Free blocks for join packets.
    blocks: Blocks,
    /// Contexts parked in a call a signal handler ends (flag
    /// `INTERRUPTIBLE`), and this thread's count of handlers when the
    /// runtime last looked (see `scheduler::interrupt`).
    interruptible: u32,
    signals_seen: u64,
}

/// One runtime's scheduler.
pub(crate) struct Core {
    local: UnsafeCell<Local>,
    pub(crate) shared: Arc<Shared>,
    /// This runtime's name in the registry, for handles of its fibers.
    pub(crate) id: RuntimeId,
    pub(crate) default_stack: usize,
    /// How long to keep polling without sleeping before a wait (ns; see
    /// [`Core::poll`] and `Builder::busy_poll`).
    busy_poll_ns: u64,
    /// For a worker of a runtime of several: its inbox and siblings.
    worker: Option<WorkerLink<Job>>,
    /// The process's fork generation when the runtime was made: in a child
    /// forked since, the runtime is its parent's and must not run (see
    /// `scheduler::fork`).
    pub(crate) fork_gen: u32,
}

impl Core {
    pub(crate) fn new(
        default_stack: usize,
        tuning: Tuning,
        worker: Option<WorkerLink<Job>>,
    ) -> std::io::Result<Core> {
        let Tuning {
            stall,
            busy_poll,
            stall_stacks,
            exit_on_deadlock,
            count_time,
        } = tuning;
        if count_time {
            crate::scheduler::cpu_time::start();
        }
        let reactor = Reactor::new()?;
        let root_id = FiberId::next();
        let shared = Arc::new(Shared::new(reactor.registry(), root_id)?);
        let root_meta: *const Meta = &shared.watch.root;
        let stall_ns = u64::try_from(stall.as_nanos()).unwrap_or(u64::MAX);
        shared
            .watch
            .threshold_ns
            .store(stall_ns, std::sync::atomic::Ordering::Relaxed);
        shared
            .watch
            .sample_stacks
            .store(stall_stacks, std::sync::atomic::Ordering::Relaxed);
        shared.watch.set_exit_on_deadlock(exit_on_deadlock);
        let mut fibers = Records::with_capacity(64);
        let root = fibers.insert_with(|| Record {
            state: State::Running,
            id: root_id,
            meta: root_meta,
            ..Record::vacant()
        });
        debug_assert_eq!(root, ROOT);
        let core = Core {
            local: UnsafeCell::new(Local {
                fibers,
                run_queue: RunQueue::with_capacity(64),
                idle_queue: RunQueue::with_capacity(0),
                fiber_locals: 0,
                current: ROOT,
                budget: 0,
                live: 0,
                park_seq: 1,
                timers: Wheel::new(),
                reactor,
                entered: false,
                closing: false,
                resumed: 0,
                count_time,
                switched_at: crate::scheduler::cpu_time::now(),
                populated_ahead: 0,
                io_calls: 0,
                io_since: 0,
                unwinding_suspended: 0,
                fired: Vec::new(),
                io_ready: Vec::new(),
                remote: Vec::new(),
                dumps: Vec::new(),
                spare: Spare::new(default_stack),
                blocks: Blocks::new(),
                in_callback: None,
                cpu_share: share_cpu::CpuShare::default(),
                interruptible: 0,
                signals_seen: crate::scheduler::interrupt::epoch().word(),
            }),
            id: registry::register(shared.clone()),
            shared,
            default_stack,
            busy_poll_ns: u64::try_from(busy_poll.as_nanos()).unwrap_or(u64::MAX),
            worker,
            fork_gen: crate::scheduler::fork::generation(),
        };
        if stall_ns != u64::MAX {
            crate::scheduler::watchdog_sleep::register();
        }
        Ok(core)
    }

    /// The thread-local state.
    ///
    /// # Safety
    ///
    /// Call only on the runtime's thread, and do not keep the reference
    /// across a switch or while another one obtained here is in use (see the
    /// ground rules).
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub(crate) unsafe fn local(&self) -> &mut Local {
        // SAFETY: forwarded from the caller.
        unsafe { &mut *self.local.get() }
    }

    // ----- spawning -----------------------------------------------------

    /// A stack for a new fiber, with `usable` bytes (a validated size).
    #[inline]
    pub(crate) fn take_stack(&self, usable: usize) -> std::io::Result<Stack> {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.spare.take(usable)
    }

    /// A free block for a join packet, if the runtime keeps one.
    #[inline]
    pub(crate) fn take_block(&self) -> Option<std::ptr::NonNull<u8>> {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.blocks.take()
    }

    /// Keeps a freed packet's block for the next spawn.
    ///
    /// # Safety
    ///
    /// As for [`Blocks::give_back`].
    #[inline]
    pub(crate) unsafe fn give_back_block(&self, block: std::ptr::NonNull<u8>) {
        // SAFETY: on the runtime's thread; short borrow; the rest is
        // forwarded from the caller.
        unsafe { self.local().blocks.give_back(block) }
    }

    /// How many fibers wait in the run queue: a new one runs after them.
    #[inline]
    pub(crate) fn queued(&self) -> usize {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.run_queue.len()
    }

    /// The key [`Core::add_fiber`] will give the next fiber.
    #[inline]
    pub(crate) fn next_key(&self) -> Key {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.fibers.next_key()
    }

    /// Adds a fiber whose first switch-in calls `entry(arg, data)` on `stack`
    /// (prepared by `fiber::spawn`), queues it, and returns its key. `sp` is
    /// its first frame's, or stands for a deferred one (see `first_frame`).
    pub(crate) fn add_fiber(
        &self,
        stack: Stack,
        sp: *mut u8,
        id: FiberId,
        name: Option<Arc<str>>,
    ) -> Key {
        // Checked here, the span made out of line: a disabled `Span` is
        // still a 40-byte value that the macro builds and moves around. It
        // is made before the borrow below: `new_span` is the subscriber's
        // code, and may spawn fibers of its own.
        let span = if tracing::level_enabled!(tracing::Level::TRACE) {
            self.fiber_span(id, name.as_deref())
        } else {
            None
        };
        // SAFETY: on the runtime's thread (spawning needs the runtime entered
        // or owned by this thread); no other borrow is live, and this one
        // ends before the event below.
        let l = unsafe { self.local() };
        let park = l.next_park();
        let cancelled = l.closing;
        let has_span = span.is_some();
        let key = l.fibers.insert_with(|| Record {
            sp,
            meta: crate::scheduler::watch::meta_below(stack.header()),
            flags: Flags::new(cancelled, has_span),
            running_header: stack.header(),
            stack: Some(stack),
            park,
            state: State::Ready,
            wake: Wake::Unparked,
            notified: false,
            unwinding: false,
            id,
            name,
            timeout: None,
            waiting_on: StoredWait::NONE,
            waiting_until: NO_DEADLINE,
            span,
        });
        l.live += 1;
        l.push_ready(key, false, &self.shared);
        self.trace(move || tracing::trace!(fiber = id.as_u64(), "spawn"));
        key
    }

    /// Makes the fiber just spawned at `key` an idle one (see
    /// `Builder::idle`): out of the run queue, into the idle queue. Kept
    /// off the spawn path, which every other fiber takes.
    #[cold]
    pub(crate) fn make_idle(&self, key: Key) {
        // SAFETY: on the runtime's thread; short borrow, no user code.
        let l = unsafe { self.local() };
        let rec = &mut l.fibers[key];
        rec.flags.set_idle();
        if rec.state == State::Ready && l.run_queue.remove(key) {
            l.idle_queue.push_back(key);
        }
    }

    /// The span of a new fiber, when a subscriber wants one.
    #[cold]
    #[inline(never)]
    fn fiber_span(&self, id: FiberId, name: Option<&str>) -> Option<Box<tracing::Span>> {
        let worker = self.worker.as_ref().map(WorkerLink::index);
        self.callback("Subscriber::new_span", || {
            let span = tracing::trace_span!("fiber", id = id.as_u64(), name, worker);
            (!span.is_disabled()).then(|| Box::new(span))
        })
    }
}
