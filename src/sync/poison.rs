//! Lock poisoning, as std does it: a lock whose guard is dropped while its
//! holder unwinds is marked, and later `lock` calls say so with a
//! [`PoisonError`](std::sync::PoisonError) that still carries the guard.
//!
//! "Unwinding" is judged per fiber, not per thread (see
//! `park::unwinding`): a fiber cancelled, timed out or panicking while it
//! holds a lock poisons it; another fiber of the same thread does not.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LockResult, PoisonError};

use crate::scheduler::park;

pub(crate) struct Flag {
    failed: AtomicBool,
}

/// Whether the holder was already unwinding when it took the lock (then
/// its drop does not poison: the data was not left half-updated by *this*
/// unwind).
pub(crate) struct Guard {
    panicking: bool,
}

impl Flag {
    pub(crate) const fn new() -> Flag {
        Flag {
            failed: AtomicBool::new(false),
        }
    }

    /// Called right after taking the lock.
    pub(crate) fn guard(&self) -> Guard {
        Guard {
            panicking: park::unwinding(),
        }
    }

    /// Called right before releasing the lock.
    pub(crate) fn done(&self, guard: &Guard) {
        if !guard.panicking && park::unwinding() {
            self.failed.store(true, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    pub(crate) fn clear(&self) {
        self.failed.store(false, Ordering::Relaxed);
    }
}

/// `Ok(value)`, or `Err(PoisonError(value))` if the flag is set.
pub(crate) fn map_result<T>(flag: &Flag, value: T) -> LockResult<T> {
    if flag.get() {
        Err(PoisonError::new(value))
    } else {
        Ok(value)
    }
}
