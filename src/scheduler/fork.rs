//! A `fork` made by a thread that runs a runtime (from one of its fibers,
//! or its `block_on` closure): the child runs on as plain blocking code.
//!
//! The child of a `fork` has one thread, the one that forked, and a copy
//! of the parent's memory: every runtime's state, but not its helper
//! threads; and it shares the parent's open file descriptions: the same
//! epoll instances, timerfds and eventfds. Anything the child did with its
//! copy of a runtime would change the parent's (an `epoll_ctl` on the
//! shared instance removes the parent's registration; a `timerfd_settime`
//! moves the parent's timer), and fibers parked in it wait for helper
//! threads that are not there. So, as a program with no runtime does:
//!
//! - the child's thread leaves every runtime ([`generation`] moves on, and
//!   the thread's runtime context is cleared by `context`'s child
//!   handler), so its blocking calls block it — fibra's own and, with the
//!   `hook` feature, the hooked libc calls — and it can start a runtime of
//!   its own;
//! - a runtime made before the fork is never run in the child: entering
//!   it, polling it, or ending the fiber that forked (which would run the
//!   next of its copied fibers) ends the child with a message instead
//!   ([`forked_runtime`]). The child of a fork in a fiber is to `exec` or
//!   `_exit`, as a child of a threaded program is;
//! - fibra's helper threads are made anew in the child when it needs them
//!   (see `blocking` and the watchdog).
//!
//! Every fd fibra opens is close-on-exec: an exec'd child inherits none.

use std::sync::atomic::{AtomicU32, Ordering};

/// How many forks this process descends from, counted in each child (0 in
/// a process that was not forked after a runtime was made).
static GENERATION: AtomicU32 = AtomicU32::new(0);

/// The current generation: a runtime made in another one belongs to an
/// ancestor process.
#[inline]
pub(crate) fn generation() -> u32 {
    GENERATION.load(Ordering::Relaxed)
}

/// Counts a fork, in the child (async-signal-safe: one atomic add).
pub(crate) fn forked() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// A runtime made before this process was forked from its parent was
/// about to run here: say so and end the child, before it touches
/// anything of the parent's (see the module docs).
#[cold]
#[inline(never)]
pub(crate) fn forked_runtime() -> ! {
    const MSG: &[u8] = b"fibra: the child of a fork made inside a fibra runtime returned to its \
copy of that runtime, which it shares kernel objects with its parent's: a child forked in a \
fiber must exec or _exit (it runs as plain blocking code until then). Exiting.\n";
    // SAFETY: a write of a static buffer to stderr, then _exit: neither
    // touches the parent's state nor runs destructors that would.
    unsafe {
        libc::write(2, MSG.as_ptr().cast(), MSG.len());
        libc::_exit(70) // EX_SOFTWARE
    }
}
