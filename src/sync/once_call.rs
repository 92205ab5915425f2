//! [`Once`]: std's one-time initialization of something that is not a
//! value of its own (a C library's setup, a global registration), for
//! fibers and threads alike: callers that come while it runs wait — a fiber
//! parks, a thread blocks.
//!
//! It is a [`OnceLock<()>`](crate::sync::OnceLock) (whose wait list parks
//! fibers) and a poison flag: std's `Once` is poisoned when its closure
//! panics, and a later `call_once` or `wait` panics too, where a
//! `OnceLock` simply lets the next caller try.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::sync::OnceLock;

/// Runs a closure exactly once, however many fibers and threads call it;
/// those that come while it runs wait until it is done. std's
/// `std::sync::Once`, for fibers: a waiting fiber parks (its runtime runs
/// other fibers meanwhile), so the closure may itself block on fibra's
/// I/O, timers or locks.
///
/// If the closure panics, the `Once` is *poisoned*: later
/// [`call_once`](Once::call_once)s and [`wait`](Once::wait)s panic,
/// while [`call_once_force`](Once::call_once_force) runs its closure
/// with [`OnceState::is_poisoned`] true, and its success ends the poison.
///
/// ```
/// use fibra::sync::Once;
///
/// static SETUP: Once = Once::new();
///
/// fibra::run(|| {
///     let fibers: Vec<_> = (0..4)
///         .map(|_| fibra::spawn(|| SETUP.call_once(|| println!("once"))))
///         .collect();
///     for f in fibers {
///         f.join().unwrap();
///     }
///     assert!(SETUP.is_completed());
/// });
/// ```
pub struct Once {
    done: OnceLock<()>,
    /// A closure panicked, and none has succeeded since.
    poisoned: AtomicBool,
}

/// What [`Once::call_once_force`] tells its closure.
#[derive(Debug)]
pub struct OnceState {
    poisoned: bool,
}

impl OnceState {
    /// Whether an earlier closure of this `Once` panicked.
    ///
    /// ```
    /// let once = fibra::sync::Once::new();
    /// once.call_once_force(|state| assert!(!state.is_poisoned()));
    /// ```
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }
}

const POISONED: &str = "Once instance has previously been poisoned";

/// Poisons its `Once` if dropped during the closure's unwind.
struct PoisonOnUnwind<'a>(&'a AtomicBool);

impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        // Stored before the cell's own unwind guard wakes the waiters
        // (that guard is dropped after this one), under whose lock they
        // look: a waiter woken by it sees the poison.
        self.0.store(true, Ordering::Release);
    }
}

impl Once {
    const_unless_loom! {
        /// A `Once` no call has run yet; `const`, for a `static`.
        ///
        /// ```
        /// static INIT: fibra::sync::Once = fibra::sync::Once::new();
        /// INIT.call_once(|| {});
        /// ```
        pub fn new() -> Once {
            Once {
                done: OnceLock::new(),
                poisoned: AtomicBool::new(false),
            }
        }
    }

    /// Runs `f` if no call of this `Once` has completed yet; waits while
    /// another call runs. Returns once some call has completed.
    ///
    /// # Panics
    ///
    /// If the `Once` is poisoned (an earlier closure panicked), and with
    /// `f`'s own panic, which poisons it.
    ///
    /// ```
    /// let once = fibra::sync::Once::new();
    /// let mut runs = 0;
    /// once.call_once(|| runs += 1);
    /// once.call_once(|| runs += 1);
    /// assert_eq!(runs, 1);
    /// ```
    pub fn call_once(&self, f: impl FnOnce()) {
        if self.is_completed() {
            return;
        }
        self.done.get_or_init(|| {
            if self.poisoned.load(Ordering::Acquire) {
                panic!("{POISONED}");
            }
            let poison = PoisonOnUnwind(&self.poisoned);
            f();
            std::mem::forget(poison);
        });
    }

    /// As [`call_once`](Once::call_once), but runs `f` on a poisoned
    /// `Once` too, telling it so; if `f` returns, the `Once` is complete
    /// and no longer poisoned.
    ///
    /// ```
    /// use fibra::sync::Once;
    ///
    /// let once = Once::new();
    /// let _ = std::panic::catch_unwind(|| once.call_once(|| panic!("first try")));
    /// once.call_once_force(|state| assert!(state.is_poisoned()));
    /// assert!(once.is_completed());
    /// ```
    pub fn call_once_force(&self, f: impl FnOnce(&OnceState)) {
        if self.is_completed() {
            return;
        }
        self.done.get_or_init(|| {
            let state = OnceState {
                poisoned: self.poisoned.load(Ordering::Acquire),
            };
            let poison = PoisonOnUnwind(&self.poisoned);
            f(&state);
            std::mem::forget(poison);
            self.poisoned.store(false, Ordering::Release);
        });
    }

    /// Whether some call has completed (not while one runs, nor after
    /// one panicked).
    ///
    /// ```
    /// let once = fibra::sync::Once::new();
    /// assert!(!once.is_completed());
    /// once.call_once(|| {});
    /// assert!(once.is_completed());
    /// ```
    pub fn is_completed(&self) -> bool {
        self.done.value().is_some()
    }

    /// Waits until some call has completed, without running anything.
    ///
    /// # Panics
    ///
    /// If the `Once` is poisoned, or becomes so while this waits.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use fibra::sync::Once;
    ///
    /// fibra::run(|| {
    ///     let once = Arc::new(Once::new());
    ///     let waiter = {
    ///         let once = once.clone();
    ///         fibra::spawn(move || once.wait())
    ///     };
    ///     once.call_once(|| {});
    ///     waiter.join().unwrap();
    /// });
    /// ```
    pub fn wait(&self) {
        let poisoned = || self.poisoned.load(Ordering::Acquire);
        if self.done.wait_unless(poisoned).is_none() {
            panic!("{POISONED}");
        }
    }

    /// Waits until some call has completed, poisoned or not.
    ///
    /// ```
    /// let once = fibra::sync::Once::new();
    /// once.call_once_force(|_| {});
    /// once.wait_force();
    /// ```
    pub fn wait_force(&self) {
        self.done.wait();
    }
}

impl Default for Once {
    fn default() -> Once {
        Once::new()
    }
}

impl fmt::Debug for Once {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Once").finish_non_exhaustive()
    }
}
