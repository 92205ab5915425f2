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
//!   through [`Core::local`]. A `&mut Local` is never held across a switch:
//!   it is re-borrowed after every switch (other fibers run in between).
//! - A fiber runs only while its runtime is entered on this thread (the
//!   `CONTEXT` thread-local points at its `Core`), and the `Core` outlives
//!   every fiber: dropping the runtime cancels and finishes them first.
//! - A record is removed only by the context that resumes after the fiber's
//!   final switch ([`Core::after_switch`]): a fiber cannot free the stack it
//!   is running on.

use std::cell::UnsafeCell;
use std::num::NonZeroU64;
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::arch;
use crate::reactor::Reactor;
use crate::runtime::blocks::Blocks;
use crate::runtime::dump::{FiberInfo, FiberState, Section};
use crate::runtime::park::{StoredWait, WaitOn};
use crate::runtime::pool::WorkerLink;
use crate::runtime::records::Records;
use crate::runtime::registry::{self, RuntimeId};
use crate::runtime::run_queue::RunQueue;
use crate::runtime::shared::{Remote, Shared};
use crate::stack::{self, Spare, Stack, StackHeader, overflow};
use crate::time::clock;
use crate::time::wheel::{Fired, Wheel};

/// `Record::waiting_until` of a park without a deadline.
const NO_DEADLINE: u64 = u64::MAX;

/// A fiber's slot in its runtime.
pub(crate) type Key = u32;

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

/// A fiber's identity, unique in the process for its whole life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FiberId(NonZeroU64);

impl FiberId {
    /// The id in a vacant record: never a fiber's (ids start at 1 and are
    /// handed out upwards).
    const VACANT: FiberId = FiberId(NonZeroU64::MAX);

    /// A new id. Threads take ids from the global counter in blocks, so
    /// spawning touches no shared cache line.
    pub(crate) fn next() -> FiberId {
        const BLOCK: u64 = 1024;
        static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);
        thread_local! {
            static RANGE: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
        }
        let id = RANGE.with(|r| {
            let (mut next, mut end) = r.get();
            if next == end {
                next = NEXT_BLOCK.fetch_add(BLOCK, Ordering::Relaxed);
                end = next + BLOCK;
            }
            r.set((next + 1, end));
            next
        });
        FiberId(NonZeroU64::new(id).expect("fiber ids exhausted"))
    }

    /// The id whose number is `n` (none for 0).
    pub(crate) fn from_u64(n: u64) -> Option<FiberId> {
        NonZeroU64::new(n).map(FiberId)
    }

    /// The id as a number (for logs and metrics).
    ///
    /// ```
    /// fibra::run(|| assert!(fibra::current().id().as_u64() > 0));
    /// ```
    pub fn as_u64(self) -> u64 {
        self.0.get()
    }
}

impl std::fmt::Display for FiberId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Names one park of one fiber; see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WakeToken {
    pub(crate) key: Key,
    pub(crate) park: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// In the run queue.
    Ready,
    Running,
    Parked,
    /// Finished; its record waits for `after_switch` to remove it.
    Done,
    /// Not a fiber: a free slot of [`Records`].
    Vacant,
}

/// Why a park ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    Unparked,
    TimedOut,
    Cancelled,
}

/// The innermost `fibra::timeout` around the running code of a fiber.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimeoutScope {
    pub(crate) deadline: u64,
    /// Non-zero, so that an `Option<TimeoutScope>` takes no tag word.
    pub(crate) id: NonZeroU64,
}

pub(crate) struct Record {
    /// The saved stack pointer while the context is not running.
    sp: *mut u8,
    /// `None` for the root, which runs on the thread's stack.
    pub(crate) stack: Option<Stack>,
    /// The header of the stack the context runs on, for the overflow
    /// report: its own stack's, or a generator's while it drives one
    /// (null: a thread's stack).
    pub(crate) running_header: *const StackHeader,
    /// The sequence number of the current (or next) park.
    park: u64,
    pub(crate) state: State,
    wake: Wake,
    /// Woken with the current token before it parked.
    notified: bool,
    pub(crate) cancelled: bool,
    /// We started unwinding this context (cancellation or a timeout) and
    /// it has not been seen outside a panic since; see `current_is_unwinding`.
    unwinding: bool,
    pub(crate) id: FiberId,
    pub(crate) name: Option<Arc<str>>,
    pub(crate) timeout: Option<TimeoutScope>,
    /// What its last park waited for, and until when (for dumps).
    waiting_on: StoredWait,
    /// Its deadline (ns), or `NO_DEADLINE` (a sentinel rather than an
    /// `Option`, which would take 8 more bytes: see `span`).
    waiting_until: u64,
    /// The fiber's tracing span, boxed and only when a subscriber wants it:
    /// a `Span` is 40 bytes, and the record stays within 128 (two cache
    /// lines written at every spawn).
    pub(crate) span: Option<Box<tracing::Span>>,
}

impl Record {
    /// The record of a vacant slot (see [`Records`]): it owns nothing.
    pub(crate) fn vacant() -> Record {
        Record {
            sp: ptr::null_mut(),
            stack: None,
            running_header: ptr::null(),
            park: 0,
            state: State::Vacant,
            wake: Wake::Unparked,
            notified: false,
            cancelled: false,
            unwinding: false,
            id: FiberId::VACANT,
            name: None,
            timeout: None,
            waiting_on: StoredWait::NONE,
            waiting_until: NO_DEADLINE,
            span: None,
        }
    }
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

pub(crate) struct Local {
    pub(crate) fibers: Records,
    run_queue: RunQueue,
    /// The context running now.
    pub(crate) current: Key,
    /// Fibers that may still run before control returns to the root.
    budget: u32,
    /// Spawned fibers that have not finished.
    pub(crate) live: usize,
    park_seq: u64,
    pub(crate) timers: Wheel<WakeToken>,
    pub(crate) reactor: Reactor,
    /// Inside `block_on`, `run`, `turn` or drop.
    pub(crate) entered: bool,
    /// Being dropped: new fibers start cancelled.
    pub(crate) closing: bool,
    /// Switches into fibers, for `turn`'s count.
    pub(crate) resumed: u64,
    /// Socket calls since `resumed` was `io_since` (see [`IO_BUDGET`]).
    io_calls: u32,
    io_since: u64,
    /// Contexts suspended in the middle of unwinding. Each makes
    /// `std::thread::panicking()` true for every context of the thread (the
    /// panic count is per thread, not per fiber).
    pub(crate) unwinding_suspended: usize,
    fired: Vec<Fired<WakeToken>>,
    io_ready: Vec<WakeToken>,
    remote: Vec<Remote>,
    /// Free stacks of the default size, reused before the thread's pool.
    spare: Spare,
    /// Free blocks for join packets.
    blocks: Blocks,
}

/// One runtime's scheduler.
pub(crate) struct Core {
    local: UnsafeCell<Local>,
    pub(crate) shared: Arc<Shared>,
    /// This runtime's name in the registry, for handles of its fibers.
    pub(crate) id: RuntimeId,
    pub(crate) default_stack: usize,
    /// For a worker of a runtime of several: its inbox and siblings.
    worker: Option<WorkerLink>,
}

impl Core {
    pub(crate) fn new(default_stack: usize, worker: Option<WorkerLink>) -> std::io::Result<Core> {
        let reactor = Reactor::new()?;
        let shared = Arc::new(Shared::new(reactor.registry())?);
        let mut fibers = Records::with_capacity(64);
        let root = fibers.insert_with(|| Record {
            state: State::Running,
            id: FiberId::next(),
            ..Record::vacant()
        });
        debug_assert_eq!(root, ROOT);
        Ok(Core {
            local: UnsafeCell::new(Local {
                fibers,
                run_queue: RunQueue::with_capacity(64),
                current: ROOT,
                budget: 0,
                live: 0,
                park_seq: 1,
                timers: Wheel::new(),
                reactor,
                entered: false,
                closing: false,
                resumed: 0,
                io_calls: 0,
                io_since: 0,
                unwinding_suspended: 0,
                fired: Vec::new(),
                io_ready: Vec::new(),
                remote: Vec::new(),
                spare: Spare::new(default_stack),
                blocks: Blocks::new(),
            }),
            id: registry::register(shared.clone()),
            shared,
            default_stack,
            worker,
        })
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

    /// The key [`Core::add_fiber`] will give the next fiber.
    #[inline]
    pub(crate) fn next_key(&self) -> Key {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.fibers.next_key()
    }

    /// Adds a fiber whose first switch-in calls `entry(arg, data)` on `stack`
    /// (prepared by `fiber::spawn`), queues it, and returns its key.
    pub(crate) fn add_fiber(
        &self,
        stack: Stack,
        sp: *mut u8,
        id: FiberId,
        name: Option<Arc<str>>,
    ) -> Key {
        // Checked here, the span made out of line: a disabled `Span` is
        // still a 40-byte value that the macro builds and moves around.
        let span = if tracing::level_enabled!(tracing::Level::TRACE) {
            self.fiber_span(id, name.as_deref())
        } else {
            None
        };
        // SAFETY: on the runtime's thread (spawning needs the runtime entered
        // or owned by this thread); no other borrow is live.
        let l = unsafe { self.local() };
        let park = l.next_park();
        let cancelled = l.closing;
        let key = l.fibers.insert_with(|| Record {
            sp,
            running_header: stack.header(),
            stack: Some(stack),
            park,
            state: State::Ready,
            wake: Wake::Unparked,
            notified: false,
            cancelled,
            unwinding: false,
            id,
            name,
            timeout: None,
            waiting_on: StoredWait::NONE,
            waiting_until: NO_DEADLINE,
            span,
        });
        l.live += 1;
        l.push_ready(key, &self.shared);
        trace(move || tracing::trace!(fiber = id.as_u64(), "spawn"));
        key
    }

    /// The span of a new fiber, when a subscriber wants one.
    #[cold]
    #[inline(never)]
    fn fiber_span(&self, id: FiberId, name: Option<&str>) -> Option<Box<tracing::Span>> {
        let span = tracing::trace_span!(
            "fiber",
            id = id.as_u64(),
            name,
            worker = self.worker.as_ref().map(WorkerLink::index)
        );
        (!span.is_disabled()).then(|| Box::new(span))
    }

    /// Called first thing by a new fiber: enters its tracing span and tells
    /// its id and whether it was cancelled before it started.
    pub(crate) fn begin_current(&self) -> (FiberId, bool) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let rec = l.running();
        span_enter(&rec.span);
        (rec.id, rec.cancelled)
    }

    /// The running context's id and name, for `fibra::current`.
    pub(crate) fn current_fiber(&self) -> (FiberId, Option<Arc<str>>) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let rec = l.running();
        (rec.id, rec.name.clone())
    }

    /// Narrows the current context's `fibra::timeout` deadline; returns the
    /// previous scope for [`Core::restore_timeout`]. An outer deadline that
    /// comes first stays in force.
    pub(crate) fn set_timeout(&self, deadline: u64, id: NonZeroU64) -> Option<TimeoutScope> {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let rec = l.running();
        let previous = rec.timeout;
        if previous.is_none_or(|p| deadline < p.deadline) {
            rec.timeout = Some(TimeoutScope { deadline, id });
        }
        previous
    }

    pub(crate) fn restore_timeout(&self, previous: Option<TimeoutScope>) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        l.running().timeout = previous;
    }

    /// Records that the current context now runs on the stack of
    /// `header` (a generator's, or its own again); returns the previous one.
    pub(crate) fn swap_running_header(&self, header: *const StackHeader) -> *const StackHeader {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let rec = l.running();
        overflow::set_running(header);
        std::mem::replace(&mut rec.running_header, header)
    }

    // ----- switching ----------------------------------------------------

    /// Suspends `from` and resumes `to`.
    ///
    /// Never inlined: every switch in fibra happens at this one call site, so
    /// every suspended context resumes at the same return address and the
    /// CPU's return-stack predictor is right (see `asm/x86_64.S`). (A
    /// fiber's final switch is made by its trampoline instead: see
    /// [`Core::exit_current`].)
    ///
    /// The returns *after* that one are another matter: the return stack
    /// still holds the calls of the context that switched here, so each
    /// frame between a blocking call and this function costs a mispredicted
    /// return (about 20 cycles) when the context resumes, unless the other
    /// context came through the very same frames (two fibers yielding in
    /// the same loop) or left the return stack as it found it (a fiber
    /// that ran from its start to its end). That is why the park path
    /// (`park_current`, `park`, [`Core::park_raw`]) is inlined into its
    /// callers, and why the root parks by switching straight to the next
    /// fiber instead of through [`Core::run_root`]'s loop.
    #[inline(never)]
    fn switch_to(&self, from: Key, to: Key) {
        let (save, load) = self.hand_over(from, to);
        // `load` was saved here when `to` switched out (or built by
        // `init_stack`) and `to` has not run since; records own their stacks
        // until removed, so it is mapped. `save` points into the record of
        // `from`, which stays in the slab while `from` is suspended (the
        // slab may grow meanwhile, which is why it is re-read below, not
        // kept).
        // SAFETY: as argued above; nothing unwinds across the switch.
        let arg = unsafe { arch::switch(save, load, 0) };
        // Resumed: some context switched back to `from`.
        self.after_switch(arg);
        // SAFETY: re-borrowed after the switch; `from` runs, so its record
        // is live and its key in bounds.
        let rec = unsafe { self.local().fibers.get_unchecked(from) };
        span_enter(&rec.span);
    }

    /// Everything of a switch from `from` to `to` but the switch itself:
    /// returns where to save `from`'s stack pointer and `to`'s.
    #[inline(always)]
    fn hand_over(&self, from: Key, to: Key) -> (*mut *mut u8, *mut u8) {
        // SAFETY: on the runtime's thread; the borrow ends before the switch.
        let l = unsafe { self.local() };
        // `from` is the running context and `to` was just taken from the run
        // queue (its record checked there) or is the root, and a record is
        // removed only after its context's final switch: both keys are in
        // bounds, which is all `get_unchecked` asks.
        // SAFETY: as argued above.
        let (save, load, header) = unsafe {
            let from_rec = l.fibers.get_unchecked_mut(from);
            span_exit(&from_rec.span);
            let save: *mut *mut u8 = &mut from_rec.sp;
            let to_rec = l.fibers.get_unchecked(to);
            (save, to_rec.sp, to_rec.running_header)
        };
        l.current = to;
        l.resumed += u64::from(to != ROOT);
        overflow::set_running(header);
        (save, load)
    }

    /// Runs in the resumed context right after every switch: frees the
    /// fiber that just finished, if that switch was its last.
    #[inline(always)]
    pub(crate) fn after_switch(&self, arg: usize) {
        if arg != 0 {
            self.reap((arg - 1) as Key);
        }
    }

    #[cold]
    fn reap(&self, key: Key) {
        // SAFETY: on the runtime's thread; the finished fiber no longer runs.
        let l = unsafe { self.local() };
        debug_assert_eq!(l.fibers[key].state, State::Done);
        if let Some(stack) = l.fibers.vacate(key) {
            l.spare.give_back(stack);
        }
    }

    /// The next context a fiber hands control to: the head of the run
    /// queue, or the root once the budget is spent; `None` when no other
    /// fiber is ready. Every call counts against the budget, even one that
    /// finds nothing, so a fiber yielding alone still lets the root poll.
    #[inline(always)]
    fn next_from_fiber(l: &mut Local) -> Option<Key> {
        if l.budget == 0 {
            return Some(ROOT);
        }
        l.budget -= 1;
        while let Some(key) = l.run_queue.pop_front() {
            let rec = &mut l.fibers[key];
            if rec.state == State::Ready {
                rec.state = State::Running;
                if let Some(after) = l.run_queue.front()
                    && after != l.current
                {
                    l.prefetch(after);
                }
                return Some(key);
            }
            // Stale: the root left the loop by unwinding (`Enter::drop`).
        }
        None
    }

    /// Ends the running fiber for good: returns its final switch, for its
    /// trampoline to make, to the context that runs next (which frees the
    /// fiber's stack).
    ///
    /// Made by the trampoline, with a jump, after this and the fiber's
    /// entry have returned: the fiber leaves the return stack as it found
    /// it, so the context that resumes (a `join` of this fiber, often)
    /// returns through its own frames predicted right (see "A fiber's
    /// first and last switch" in `asm/x86_64.S`).
    pub(crate) fn exit_current(&self) -> arch::FinalSwitch {
        // SAFETY: on the runtime's thread; the borrow ends before the switch.
        let l = unsafe { self.local() };
        let me = l.current;
        let rec = l.running();
        rec.state = State::Done;
        let id = rec.id;
        trace(move || tracing::trace!(fiber = id.as_u64(), "exit"));
        l.live -= 1;
        let next = Core::next_from_fiber(l).unwrap_or(ROOT);
        // Nothing resumes this context: where `hand_over` says to save it
        // is left unwritten.
        let (_, load_sp) = self.hand_over(me, next);
        arch::FinalSwitch {
            load_sp,
            arg: me as usize + 1,
        }
    }

    // ----- parking and waking -------------------------------------------

    /// The token the current context's next park will have.
    #[inline]
    pub(crate) fn current_token(&self) -> WakeToken {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        WakeToken {
            key: l.current,
            park: l.running().park,
        }
    }

    /// Ends the current park epoch without parking: wake-ups sent with the
    /// token handed out for it become stale. For a waiter that took a token
    /// (see the ground rules) and then found it need not park after all,
    /// while its waker may still fire: that wake-up would otherwise make the
    /// next, unrelated park return at once.
    pub(crate) fn retire_token(&self) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let next_park = l.next_park();
        let rec = l.running();
        rec.park = next_park;
        rec.notified = false;
    }

    /// Parks the current context until it is woken with its token, or until
    /// `deadline` (ns). Neither unwinds nor looks at cancellation: see
    /// `runtime::park` for the layer that does.
    ///
    /// Inlined: see [`Core::switch_to`] on frames above a switch.
    #[inline(always)]
    pub(crate) fn park_raw(&self, deadline: Option<u64>, on: WaitOn) -> Wake {
        // SAFETY: on the runtime's thread; the borrow ends before the switch.
        let l = unsafe { self.local() };
        let me = l.current;
        let next_park = l.next_park();
        let rec = l.running();
        if rec.notified {
            rec.notified = false;
            rec.park = next_park;
            return Wake::Unparked;
        }
        let token = WakeToken {
            key: me,
            park: rec.park,
        };
        rec.state = State::Parked;
        rec.waiting_on = StoredWait::new(on);
        rec.waiting_until = deadline.unwrap_or(NO_DEADLINE);
        let id = rec.id;
        trace(move || tracing::trace!(fiber = id.as_u64(), "park"));
        let timer = deadline.map(|d| l.timers.insert(d, token));
        if me == ROOT {
            // Straight to the next ready fiber, as a fiber does, while the
            // budget lasts (one frame fewer to return through when resumed);
            // the loop when it is spent, when nothing is ready, and when we
            // are resumed without having been woken.
            if let Some(next) = Core::next_from_fiber(l)
                && next != ROOT
            {
                self.switch_to(ROOT, next);
            }
            // SAFETY: re-borrowed after the switch.
            if unsafe { self.local() }.root().state != State::Running {
                self.run_root(Until::RootWoken);
            }
        } else {
            let next = Core::next_from_fiber(l).unwrap_or(ROOT);
            self.switch_to(me, next);
        }
        // SAFETY: re-borrowed after the switch.
        let l = unsafe { self.local() };
        // We run again, so `current` is `me`.
        let wake = l.running().wake;
        if let Some(timer) = timer
            && wake != Wake::TimedOut
        {
            l.timers.cancel(timer);
        }
        wake
    }

    /// Whether the current context has been cancelled or runs under a
    /// `fibra::timeout`: only then may a blocking call have to unwind it.
    #[inline]
    pub(crate) fn current_may_unwind(&self) -> bool {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let rec = l.running();
        rec.cancelled || rec.timeout.is_some()
    }

    /// Whether the current context is itself unwinding.
    ///
    /// `std::thread::panicking()` cannot say: it is true on the whole thread
    /// while any context is suspended mid-unwind. It is the current context
    /// when we unwound it ourselves, or when the thread panics and no
    /// suspended context accounts for it. (Left undecided: a user panic in
    /// a fiber while another context is suspended mid-unwind; that fiber is
    /// then taken as not unwinding.)
    ///
    /// Inlined: every park asks, and the usual answer takes a load of a
    /// global and a store.
    #[inline]
    pub(crate) fn current_is_unwinding(&self) -> bool {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let rec = l.running();
        if !std::thread::panicking() {
            rec.unwinding = false; // caught since (or never started)
            return false;
        }
        rec.unwinding || l.unwinding_suspended == 0
    }

    pub(crate) fn mark_unwinding(&self, unwinding: bool) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        l.running().unwinding = unwinding;
    }

    /// Parks a context that is unwinding, counted as such while suspended.
    pub(crate) fn park_unwinding(&self, deadline: Option<u64>, on: WaitOn) -> Wake {
        self.count_unwinding_suspended(1);
        let wake = self.park_raw(deadline, on);
        self.count_unwinding_suspended(-1);
        wake
    }

    pub(crate) fn count_unwinding_suspended(&self, delta: isize) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        l.unwinding_suspended = l.unwinding_suspended.wrapping_add_signed(delta);
    }

    /// Counts a socket call of the current fiber; true when it has made
    /// [`IO_BUDGET`] of them since it was last switched in: it should
    /// yield.
    #[inline]
    pub(crate) fn io_budget_spent(&self) -> bool {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        if l.io_since != l.resumed {
            l.io_since = l.resumed;
            l.io_calls = 0;
        }
        l.io_calls += 1;
        if l.io_calls <= IO_BUDGET {
            return false;
        }
        // Spent: the yield goes through the root, which polls for I/O
        // first, so fibers waiting on other sockets get their turn too.
        l.io_calls = 0;
        l.budget = 0;
        true
    }

    /// Puts the current context behind every ready fiber and runs them.
    ///
    /// Inlined: see [`Core::switch_to`] on frames above a switch.
    #[inline(always)]
    pub(crate) fn yield_now(&self) {
        // SAFETY: on the runtime's thread; the borrow ends before the switch.
        let l = unsafe { self.local() };
        let me = l.current;
        if me == ROOT {
            l.root().state = State::Ready;
            l.run_queue.push_back(ROOT);
            self.run_root(Until::RootWoken);
            return;
        }
        // Take the next fiber first, then queue ourselves behind everything
        // (the same order as pushing first, without the push and pop when
        // we are alone).
        let Some(next) = Core::next_from_fiber(l) else {
            return; // nothing else is ready: carry on
        };
        l.running().state = State::Ready;
        l.run_queue.push_back(me);
        self.switch_to(me, next);
    }

    /// Requests cancellation of a fiber of this runtime; a parked fiber is
    /// woken so it can unwind.
    pub(crate) fn cancel(&self, key: Key, id: FiberId) {
        // SAFETY: on the runtime's thread; short borrow.
        unsafe { self.local() }.cancel(key, id, &self.shared);
    }

    // ----- the root loop ------------------------------------------------

    /// Runs fibers on behalf of the root context until `until` holds.
    ///
    /// The root's own state tells why control came back: `Running` means it
    /// was resumed from the run queue (which ends `RootWoken`); otherwise a
    /// fiber found nothing to run, or spent the budget, and the root polls.
    pub(crate) fn run_root(&self, until: Until) {
        loop {
            // SAFETY: on the runtime's thread; re-borrowed every iteration,
            // never held across the switch below.
            let l = unsafe { self.local() };
            let root = l.root();
            match until {
                // The root's turn came: it was popped from the run queue,
                // by a fiber or by this loop. Woken but still queued (Ready)
                // is not enough: it waits for its FIFO turn like any fiber.
                Until::RootWoken if root.state == State::Running => return,
                Until::NoFibers if l.live == 0 => return,
                Until::BatchDone if l.budget == 0 || l.run_queue.is_empty() => return,
                Until::Stopped if self.worker.as_ref().is_some_and(WorkerLink::stopping) => return,
                _ => {}
            }
            if l.run_queue.is_empty() {
                match &self.worker {
                    Some(worker) => worker.wait_for_work(self, l.closing),
                    None => self.poll(None),
                }
                continue;
            }
            if until != Until::BatchDone && l.budget == 0 {
                // A budget's worth of fibers ran: look for I/O and timers
                // before the next budget.
                self.poll_between_batches();
                // SAFETY: re-borrowed after polling.
                let l = unsafe { self.local() };
                l.budget = BUDGET;
            }
            // SAFETY: re-borrowed after polling.
            let l = unsafe { self.local() };
            let Some(next) = l.run_queue.pop_front() else {
                continue;
            };
            let rec = &mut l.fibers[next];
            if rec.state != State::Ready {
                continue;
            }
            rec.state = State::Running;
            if next == ROOT {
                continue; // seen at the top of the loop
            }
            l.budget = l.budget.saturating_sub(1);
            self.switch_to(ROOT, next);
        }
    }

    /// Sets the budget of a `turn` batch: the fibers ready now.
    pub(crate) fn start_batch(&self) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        l.budget = u32::try_from(l.run_queue.len()).unwrap_or(u32::MAX);
    }

    pub(crate) fn has_ready(&self) -> bool {
        // SAFETY: on the runtime's thread; short borrow.
        !unsafe { self.local() }.run_queue.is_empty()
    }

    /// The poll between two budgets of fibers, while fibers are ready. It
    /// skips `epoll_wait` when no fd is awaited: news from other threads is
    /// in `take_woken` and timers are checked without the kernel. (Events of
    /// the waker and the timerfd then stay queued in epoll, so the runtime's
    /// fd may look readable once more than needed: harmless.)
    fn poll_between_batches(&self) {
        // SAFETY: on the runtime's thread; short borrow.
        let skip_epoll = !unsafe { self.local() }.reactor.has_waiters();
        self.poll_with(Some(std::time::Duration::ZERO), skip_epoll);
    }

    /// One poll of the reactor (at most `timeout`; `None`: until an event),
    /// then due timers and messages from other threads.
    pub(crate) fn poll(&self, timeout: Option<std::time::Duration>) {
        self.poll_with(timeout, false);
    }

    fn poll_with(&self, timeout: Option<std::time::Duration>, skip_epoll: bool) {
        self.poll_events(timeout, skip_epoll);
        if let Some(worker) = &self.worker {
            // SAFETY: on the runtime's thread; short borrow.
            let l = unsafe { self.local() };
            if !l.closing {
                worker.start_own(self);
            }
            let (alive, ready) = self.figures();
            worker.publish(alive, ready);
        }
    }

    /// Fibers alive, and of those the ones ready to run (for metrics; a
    /// fiber woken twice may count twice in `ready` until it runs).
    pub(crate) fn figures(&self) -> (usize, usize) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let root_ready = usize::from(l.fibers[ROOT].state == State::Ready);
        let ready = l.run_queue.len().saturating_sub(root_ready);
        (l.live, ready.min(l.live))
    }

    /// The body of [`Core::poll_with`] that every runtime shares.
    fn poll_events(&self, timeout: Option<std::time::Duration>, skip_epoll: bool) {
        // SAFETY: on the runtime's thread; no switch happens in here.
        let l = unsafe { self.local() };
        let zero = timeout == Some(std::time::Duration::ZERO);
        let mut remote = self.shared.take_woken();
        if !skip_epoll {
            let mut timeout = timeout;
            if !zero
                && l.timers
                    .next_expiration()
                    .is_none_or(|next| next > clock::now_ns() + IDLE_RELEASE_NS)
            {
                // About to sleep for a while: a good moment to give back the
                // memory of stacks that fibers left behind. (Not before a
                // short sleep: a burst of fibers would pay for it.)
                stack::release_pending();
            }
            if !zero && let Some(next) = l.timers.next_expiration() {
                if next <= clock::now_ns() {
                    timeout = Some(std::time::Duration::ZERO);
                } else {
                    l.reactor.arm_timer(next);
                }
            }
            if remote {
                timeout = Some(std::time::Duration::ZERO);
            }
            let mut ready = std::mem::take(&mut l.io_ready);
            match l.reactor.poll(timeout, &mut ready) {
                Ok(polled) => remote |= polled.remote && self.shared.take_woken(),
                Err(e) => tracing::error!(error = %e, "epoll_wait failed"),
            }
            for token in ready.drain(..) {
                l.wake(token, Wake::Unparked, &self.shared);
            }
            l.io_ready = ready;
        }
        let mut dumps = Vec::new();
        if remote {
            let mut msgs = std::mem::take(&mut l.remote);
            self.shared.drain(&mut msgs);
            for msg in msgs.drain(..) {
                match msg {
                    Remote::Unpark(token) => {
                        l.wake(token, Wake::Unparked, &self.shared);
                    }
                    Remote::Cancel(key, id) => l.cancel(key, id, &self.shared),
                    Remote::Dump(answer) => dumps.push(answer),
                }
            }
            l.remote = msgs;
        }
        let now = clock::now_ns();
        stack::release_stale_pending(now);
        if !l.timers.is_empty() {
            let mut fired = std::mem::take(&mut l.fired);
            l.timers.advance(now, &mut fired);
            for f in fired.drain(..) {
                l.wake(f.value, Wake::TimedOut, &self.shared);
            }
            l.fired = fired;
        }
        // Answered last: `l` is not used again (an answer may wake a fiber).
        for answer in dumps {
            answer(self.dump_section());
        }
    }

    /// This runtime's fibers, for a dump.
    pub(crate) fn dump_section(&self) -> Section {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        let now = clock::now_ns();
        let fibers = l
            .fibers
            .iter()
            .filter(|(key, rec)| *key != ROOT || rec.state != State::Running)
            .filter(|(_, rec)| rec.state != State::Done)
            .map(|(key, rec)| {
                let parked = rec.state == State::Parked;
                let waiting = rec.waiting_on.get().filter(|_| parked);
                FiberInfo {
                    id: rec.id,
                    name: rec.name.as_deref().map(str::to_owned),
                    root: key == ROOT,
                    state: match rec.state {
                        State::Ready => FiberState::Ready,
                        State::Parked => FiberState::Parked,
                        State::Running | State::Done | State::Vacant => FiberState::Running,
                    },
                    waiting_on: waiting.map(|on| on.to_string()),
                    deadline_in: waiting
                        .and((rec.waiting_until != NO_DEADLINE).then_some(rec.waiting_until))
                        .map(|d| std::time::Duration::from_nanos(d.saturating_sub(now))),
                }
            })
            .collect();
        Section {
            thread: self.shared.thread_name.clone(),
            fibers: Some(fibers),
        }
    }

    /// Leaves the runtime to an outer loop: its fd must be readable when it
    /// has work, so arm the timerfd for the next timer and, if fibers are
    /// ready, wake the waker.
    pub(crate) fn prepare_outer_wait(&self) {
        stack::release_pending();
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        if let Some(next) = l.timers.next_expiration() {
            l.reactor.arm_timer(next);
        }
        if !l.run_queue.is_empty() {
            self.shared.wake_fd();
        }
    }

    /// Cancels every fiber and runs them until all have finished.
    pub(crate) fn shutdown(&self) {
        // SAFETY: on the runtime's thread; short borrow.
        let l = unsafe { self.local() };
        l.closing = true;
        let all: Vec<(Key, FiberId)> = l
            .fibers
            .iter()
            .filter(|(key, _)| *key != ROOT)
            .map(|(key, rec)| (key, rec.id))
            .collect();
        for (key, id) in all {
            l.cancel(key, id, &self.shared);
        }
        self.run_root(Until::NoFibers);
    }
}

impl Local {
    /// The record of the running context.
    ///
    /// Without a bounds check: `current` always names a live record. It is
    /// set to the root (never removed) or to a fiber taken from the run
    /// queue, whose record was checked there, and a fiber's record is
    /// removed only after its final switch (by `reap`, in the context that
    /// runs next, so never the current one's).
    #[inline(always)]
    pub(crate) fn running(&mut self) -> &mut Record {
        debug_assert!(self.fibers.get(self.current).is_some());
        // SAFETY: `current` is in bounds, as argued above.
        unsafe { self.fibers.get_unchecked_mut(self.current) }
    }

    /// The root's record, which is never removed.
    #[inline(always)]
    pub(crate) fn root(&mut self) -> &mut Record {
        debug_assert!(self.fibers.get(ROOT).is_some());
        // SAFETY: the root's slot is the first one made and never vacated.
        unsafe { self.fibers.get_unchecked_mut(ROOT) }
    }

    fn next_park(&mut self) -> u64 {
        self.park_seq += 1;
        self.park_seq
    }

    /// Starts loading the stack of `key`, which will run after the context
    /// being switched to (see `arch::prefetch_frame`). Not for the context
    /// switching out: a yield's own stack is in cache.
    ///
    /// Out of line: most pops find an empty queue or only the yielder behind
    /// them, and the fast path of a switch stays as small as it was.
    #[inline(never)]
    fn prefetch(&self, key: Key) {
        if let Some(rec) = self.fibers.get(key) {
            arch::prefetch_frame(rec.sp);
        }
    }

    /// Queues a fiber that became ready. When the runtime is not being
    /// driven, its fd must turn readable for an outer loop to notice.
    fn push_ready(&mut self, key: Key, shared: &Shared) {
        if !self.entered && self.run_queue.is_empty() {
            shared.wake_fd();
        }
        self.run_queue.push_back(key);
    }

    /// Wakes the park named by `token` with `reason`; returns whether it did.
    pub(crate) fn wake(&mut self, token: WakeToken, reason: Wake, shared: &Shared) -> bool {
        let next_park = self.park_seq + 1;
        let Some(rec) = self.fibers.get_mut(token.key) else {
            return false;
        };
        if rec.park != token.park {
            return false; // that park has ended
        }
        match rec.state {
            State::Parked => {
                rec.state = State::Ready;
                rec.wake = reason;
                let id = rec.id;
                trace(move || tracing::trace!(fiber = id.as_u64(), ?reason, "unpark"));
                rec.park = next_park;
                self.park_seq = next_park;
                self.push_ready(token.key, shared);
                true
            }
            State::Ready | State::Running => {
                if reason == Wake::Unparked {
                    rec.notified = true;
                }
                false
            }
            State::Done | State::Vacant => false,
        }
    }

    fn cancel(&mut self, key: Key, id: FiberId, shared: &Shared) {
        let Some(rec) = self.fibers.get_mut(key) else {
            return;
        };
        if rec.id != id || rec.state == State::Done {
            return;
        }
        rec.cancelled = true;
        if rec.state == State::Parked {
            let token = WakeToken {
                key,
                park: rec.park,
            };
            self.wake(token, Wake::Cancelled, shared);
        }
    }
}

/// Emits the trace event `event` makes, out of line, when TRACE is on: the
/// paths that trace a fiber's life pay one load and branch for it, not the
/// frame the event's call would need.
#[inline(always)]
fn trace(event: impl FnOnce()) {
    if tracing::level_enabled!(tracing::Level::TRACE) {
        out_of_line(event);
    }
}

#[cold]
#[inline(never)]
fn out_of_line(f: impl FnOnce()) {
    crate::runtime::context::callout(f);
}

fn span_enter(span: &Option<Box<tracing::Span>>) {
    if let Some(span) = span {
        crate::runtime::context::callout(|| {
            span.with_subscriber(|(id, dispatch)| dispatch.enter(id));
        });
    }
}

fn span_exit(span: &Option<Box<tracing::Span>>) {
    if let Some(span) = span {
        crate::runtime::context::callout(|| {
            span.with_subscriber(|(id, dispatch)| dispatch.exit(id));
        });
    }
}
