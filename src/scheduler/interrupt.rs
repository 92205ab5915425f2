//! Which signal handlers have run on this thread: how a call parked in a
//! hook learns that the kernel would have ended it with `EINTR`.
//!
//! A thread blocked in a system call is interrupted by a signal whose
//! handler runs on it: the call fails with `EINTR` (`select`, `poll`,
//! `epoll_wait` and the sleeps always; socket and pipe calls only if the
//! handler was installed without `SA_RESTART`, or the socket has a
//! timeout), and the handler runs first. A fiber parked in a hooked call
//! is not in the kernel, so the hook counts here every handler the
//! process installed through it (`hook::handlers`' trampoline calls
//! [`signal_handled`](crate::scheduler::park::signal_handled)), and a
//! hooked call compares the count after its park with the one it took
//! when it began to wait: a handler that ran in between, on this thread
//! (so while its fiber waited, as far as the program can tell), ends the
//! call as the kernel would have. The runtime wakes every context parked
//! so when it sees the count change (`Core::deliver_interrupts`).
//!
//! The count is one atomic word per thread, changed only by `fetch_add`:
//! a handler may interrupt any read of it, on its own thread.

use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    /// Low half: handlers that ran on this thread. High half: those of
    /// them installed without `SA_RESTART`.
    static RAN: AtomicU64 = const { AtomicU64::new(0) };
}

/// The handlers that had run on this thread when it was taken.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Epoch(u64);

/// How the handlers that ran since an [`Epoch`] end a parked call.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[cfg_attr(not(feature = "hook"), allow(dead_code))] // (only hooked calls park so)
pub(crate) enum Interrupted {
    /// Each had `SA_RESTART`: a restartable call goes on waiting.
    Restartable,
    /// One had not: every call fails with `EINTR`.
    NotRestartable,
}

/// Counts a handler that ran on this thread (async-signal-safe: one
/// atomic add on a thread-local without a destructor).
#[cfg_attr(not(feature = "hook"), allow(dead_code))] // (only hooked calls park so)
pub(crate) fn record(restart: bool) {
    let add = if restart { 1 } else { 1 | 1 << 32 };
    RAN.with(|r| r.fetch_add(add, Ordering::Relaxed));
}

/// This thread's count now.
#[inline]
pub(crate) fn epoch() -> Epoch {
    Epoch(RAN.with(|r| r.load(Ordering::Relaxed)))
}

impl Epoch {
    /// The count as a word, for the runtime's "anything new?".
    #[inline]
    pub(crate) fn word(self) -> u64 {
        self.0
    }

    /// Whether handlers ran between `before` and `self`, and how they end
    /// a call.
    #[cfg_attr(not(feature = "hook"), allow(dead_code))] // (only hooked calls park so)
    pub(crate) fn since(self, before: Epoch) -> Option<Interrupted> {
        if self.0 >> 32 != before.0 >> 32 {
            Some(Interrupted::NotRestartable)
        } else if self.0 != before.0 {
            Some(Interrupted::Restartable)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handler_without_sa_restart_makes_the_interruption_not_restartable() {
        let before = epoch();
        assert_eq!(epoch().since(before), None);
        record(true);
        let after_restart = epoch();
        assert_eq!(after_restart.since(before), Some(Interrupted::Restartable));
        record(false);
        assert_eq!(epoch().since(before), Some(Interrupted::NotRestartable));
        assert_eq!(
            epoch().since(after_restart),
            Some(Interrupted::NotRestartable)
        );
    }
}
