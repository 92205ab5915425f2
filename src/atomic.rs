//! The atomics and the cell that the channel's lock-free storage and the
//! wait lists of `sync` are made of: std's, or loom's when the crate is
//! built for the models
//! (`RUSTFLAGS="--cfg loom" cargo test --release --lib -- loom`), so that
//! loom can run the hand-over protocols through every interleaving of
//! their threads (see `channel/flavors/lockfree/models/`,
//! `channel/selection.rs` and `sync/models.rs`).
//!
//! So does the mutex they hold beside their atomics (a std mutex taken
//! across a loom switch would block loom's scheduler itself). Only the
//! types the modelled storage keeps in its own fields come from here: loom's atomics cannot be made in a `static`, and the rest of the
//! crate (the scheduler, a fiber's park) is not what the models check.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering, fence};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering, fence};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// Marks the middle of one side of a Dekker pair: a store of mine, then a
/// load of theirs, both `SeqCst`, which the one total order of `SeqCst`
/// accesses keeps from both missing the other's store (a waiter raises
/// its flag then looks at the positions; a notifier moves a position then
/// looks at the flag). That order is all the hardware and the compiler
/// need. loom treats `SeqCst` accesses as acquire-release and would report
/// a lost wake-up that cannot happen, but models a `SeqCst` fence
/// exactly, so a model gets one here: the same guarantee, made visible to
/// it. Nothing in a normal build.
#[inline(always)]
pub(crate) fn dekker_point() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// A spin-wait hint: a thread that waits for another's next step. In a
/// model, a yield to loom's scheduler, which must see every spin loop
/// give way (a loop that only spins is an infinite execution to it).
#[inline(always)]
pub(crate) fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// A yield of the thread to the others: to loom's scheduler in a model.
#[inline]
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// An `UnsafeCell` whose accesses go through closures, as loom's does (so
/// that loom can check that no two threads touch one at once).
#[cfg(not(loom))]
pub(crate) struct Cell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> Cell<T> {
    pub(crate) fn new(value: T) -> Cell<T> {
        Cell(std::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a pointer for reading.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with a pointer for writing.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) struct Cell<T>(loom::cell::UnsafeCell<T>);

#[cfg(loom)]
impl<T> Cell<T> {
    pub(crate) fn new(value: T) -> Cell<T> {
        Cell(loom::cell::UnsafeCell::new(value))
    }

    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        self.0.with(f)
    }

    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        self.0.with_mut(f)
    }
}

/// Runs a loom model: every interleaving of `f`'s threads with at most
/// `preemptions` preemptions per execution (two threads need 3 to reach
/// every order of the protocols' steps in these models; three threads
/// take minutes beyond 2). Threads yield or park while they wait, and each
/// of those is a branch: 10 000 of them at most.
#[cfg(all(test, loom))]
pub(crate) fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.max_branches = 10_000;
    builder.check(f);
}
