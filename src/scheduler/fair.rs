//! Fair without preemption: a context whose non-blocking calls keep
//! failing yields now and then, so that the fibers it waits for get its
//! thread.
//!
//! Fibers switch only where they wait. A fiber that spins on
//! `try_recv`, `try_send`, `try_select` or a zero-timeout `ready`, waiting
//! for another fiber of its thread to move, would spin forever: that one
//! never runs. Go runs such loops, since its scheduler preempts; here the
//! failed call itself gives way: after [`YIELD_AFTER`] failures in a row
//! with no switch between them, the caller yields once (behind every ready
//! fiber, and through the root, which polls for I/O and timers first: the
//! fiber waited for may itself wait on a socket), and the count starts
//! again.
//!
//! What it costs: a failed call reads the thread's runtime and two words
//! of its own; a call that succeeds pays nothing. A yield with no other
//! fiber ready returns at once. The bound: a failed `try_recv` takes about
//! 20 ns and a yield with another fiber ready about 25–45 ns on the
//! development VM, so yielding at every 64th failure costs a spinning
//! loop under 4 % and hands the thread over within ~1.5 µs of spinning.
//!
//! The same holds for a call that never waits and always succeeds: a
//! `send` on an unbounded channel. A fiber that sends in a loop until its
//! receiver is gone (or just sends a million messages) would never let a
//! receiver of its thread run, and the queue would grow meanwhile: after
//! [`SENDS_AFTER`] such sends in a row with no switch, it yields once.
//! That costs a send a read of the thread's runtime and two words (about
//! 1 ns), and a streaming producer one yield every 1 024 messages.
//!
//! The yield is not a cancellation point: a non-blocking call never
//! unwinds. It is skipped where a context may not switch (inside a
//! `tracing` subscriber's callback), and on a thread with no runtime,
//! which the kernel preempts.

use std::cell::Cell;

use crate::scheduler::context;

/// Failed non-blocking calls in a row, with no switch between them, after
/// which the caller yields.
pub(crate) const YIELD_AFTER: u32 = 64;

/// Sends that never wait (an unbounded channel's), in a row with no switch
/// between them, after which the sender yields.
pub(crate) const SENDS_AFTER: u32 = 1024;

thread_local! {
    /// The runtime's switch count at the last failure, and the failures
    /// counted since it last changed.
    static FUTILE: Cell<(u64, u32)> = const { Cell::new((0, 0)) };
    /// The same for sends that never wait.
    static UNWAITED: Cell<(u64, u32)> = const { Cell::new((0, 0)) };
}

/// Counts a non-blocking call that found nothing to do; yields the calling
/// context every [`YIELD_AFTER`] of them in a row.
#[inline]
pub(crate) fn futile() {
    let Some(core) = context::current() else {
        return; // a plain thread: the kernel preempts it
    };
    let switches = core.switches();
    let count = FUTILE.with(|f| {
        let (seen, count) = f.get();
        let count = if seen == switches { count + 1 } else { 1 };
        f.set((switches, if count >= YIELD_AFTER { 0 } else { count }));
        count
    });
    if count >= YIELD_AFTER {
        give_way(core);
    }
}

/// Counts a send that never waits; yields the calling context every
/// [`SENDS_AFTER`] of them in a row.
#[inline]
pub(crate) fn never_waited() {
    let Some(core) = context::current() else {
        return;
    };
    let switches = core.switches();
    let count = UNWAITED.with(|f| {
        let (seen, count) = f.get();
        let count = if seen == switches { count + 1 } else { 1 };
        f.set((switches, if count >= SENDS_AFTER { 0 } else { count }));
        count
    });
    if count >= SENDS_AFTER {
        give_way(core);
    }
}

#[cold]
#[inline(never)]
fn give_way(core: &crate::scheduler::core::Core) {
    if core.may_switch() {
        // Through the root, which polls first: the fiber waited for may
        // itself wait on a socket or a timer.
        core.spend_budget();
        core.yield_now();
    }
}
