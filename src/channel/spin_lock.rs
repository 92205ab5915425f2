//! [`SpinLock`]: the lock of a channel's line of waiters, held for a few
//! instructions and never across a park or user code.
//!
//! Why not `std::sync::Mutex`: its unlock is an atomic swap (it must learn
//! whether a thread sleeps on the lock), and a channel operation that
//! waits or hands over takes a line's lock once or twice — between fibers
//! of one thread those swaps were a third of a ping-pong's time (perf:
//! `SyncWaker::register`, `SyncWaker::claim_packet`). This unlock is a plain release
//! store. A party that finds the lock taken spins, then yields its thread
//! (the holder may have been descheduled), as crossbeam-channel's lock did.

use crate::atomic::{AtomicBool, Ordering, spin_loop, yield_now};
use crate::channel::backoff::one_cpu;
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and one guard exists
// at a time (`lock`): the lock serialises every access, as a Mutex does.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: as above; moving the lock moves the value.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) fn new(value: T) -> SpinLock<T> {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        if self
            .locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard { lock: self }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut step = 0u32;
        loop {
            // (On one CPU the holder cannot run while we spin: yield.)
            if step < 7 && !one_cpu() {
                for _ in 0..1u32 << step {
                    spin_loop();
                }
                step += 1;
            } else {
                yield_now();
            }
            if !self.locked.load(Ordering::Relaxed)
                && self
                    .locked
                    .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
        }
    }
}

/// The lock, held; released on drop.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard is the one holder of the lock (`lock`).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` is unique.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}
