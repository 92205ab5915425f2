//! Synchronisation for fibers and threads: locks, condition variables,
//! semaphores, barriers, wait groups, channels and lazily initialised
//! cells ([`OnceLock`], [`LazyLock`]) and one-time calls ([`Once`]), in std's shapes.
//!
//! Every blocking call here parks the calling fiber — its runtime runs
//! other fibers meanwhile — or, called from a plain thread, blocks the
//! thread. Fibers of one runtime, of several runtimes and plain threads may
//! share any of these in any mix. (A `std::sync::Mutex` held across a park
//! would stall the whole runtime of the fiber that waits for it; these do
//! not.)
//!
//! All of them stand on the runtime's one park/unpark primitive and on one
//! FIFO of waiters: waiters are served in the order they came,
//! and a waiter that is cancelled, or times out, just as it is served passes
//! what it was given on to the next in line. The uncontended paths are a
//! single atomic operation ([`Mutex`], [`RwLock`], [`Semaphore`]): no
//! syscall. The channels, [`mpsc`] and [`oneshot`], are std's faces on
//! [`fibra::channel`](crate::channel), one lock-free core for every
//! channel of the crate.
//!
//! ```
//! use std::sync::Arc;
//! use fibra::sync::{mpsc, Mutex};
//!
//! fibra::run(|| {
//!     let total = Arc::new(Mutex::new(0));
//!     let (tx, rx) = mpsc::sync_channel(4);
//!     let consumer = {
//!         let total = total.clone();
//!         fibra::spawn(move || {
//!             for n in rx {
//!                 *total.lock().unwrap() += n;
//!             }
//!         })
//!     };
//!     for n in 1..=100 {
//!         tx.send(n).unwrap(); // parks whenever 4 are queued
//!     }
//!     drop(tx);
//!     consumer.join().unwrap();
//!     assert_eq!(*total.lock().unwrap(), 5050);
//! });
//! ```

/// A constructor that is `const` in a normal build but not in loom's
/// (`--cfg loom`), whose atomics and locks cannot be made in a `const`:
/// tokio's way, so that the same code is what the models check.
macro_rules! const_unless_loom {
    ($(#[$attr:meta])* $vis:vis fn $($rest:tt)*) => {
        #[cfg(not(loom))]
        $(#[$attr])* $vis const fn $($rest)*
        #[cfg(loom)]
        $(#[$attr])* $vis fn $($rest)*
    };
}

mod barrier;
mod condvar;
mod lazy;
#[cfg(all(test, loom))]
mod models;
pub mod mpsc;
mod mutex;
mod once;
mod once_call;
pub mod oneshot;
mod poison;
mod raw_semaphore;
mod rwlock;
mod semaphore;
mod wait_group;
pub(crate) mod waiters;

pub use barrier::{Barrier, BarrierWaitResult};
pub use condvar::{Condvar, WaitTimeoutResult};
pub use lazy::LazyLock;
pub use mutex::{Mutex, MutexGuard};
pub use once::OnceLock;
pub use once_call::{Once, OnceState};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{OwnedPermit, Permit, Semaphore};
pub use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult};
pub use wait_group::WaitGroup;
