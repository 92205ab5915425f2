//! [`Mutex`]: std's mutex, for fibers and threads alike.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::{LockResult, TryLockError, TryLockResult};
use std::time::Duration;

use crate::sync::poison;
use crate::sync::raw_semaphore::RawSemaphore;
use crate::timer::clock;

/// A mutual-exclusion lock with std's interface, whose `lock` parks the
/// calling fiber (its runtime runs other fibers meanwhile) or blocks the
/// calling thread.
///
/// - Fibers of any runtime and plain threads may share one mutex, and a
///   fiber may hold the guard across parks (sleeps, I/O, other locks) —
///   which would stall a whole runtime with `std::sync::Mutex`.
/// - Waiters are served in FIFO order, the lock handed directly to the
///   first in line: nobody starves.
/// - Locking and unlocking an uncontended mutex is one atomic operation each.
/// - Poisoning as in std: if the holder unwinds (panics, or is cancelled
///   while holding it), later `lock`s return a
///   [`PoisonError`](std::sync::PoisonError) that still gives access to the
///   data.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use fibra::sync::Mutex;
///
/// fibra::run(|| {
///     let log = Arc::new(Mutex::new(Vec::new()));
///     let fibers: Vec<_> = (0..3)
///         .map(|i| {
///             let log = log.clone();
///             fibra::spawn(move || {
///                 let mut log = log.lock().unwrap();
///                 log.push(i);
///                 fibra::sleep(Duration::from_millis(1)); // held across a park
///                 log.push(i);
///             })
///         })
///         .collect();
///     for f in fibers {
///         f.join().unwrap();
///     }
///     assert_eq!(*log.lock().unwrap(), [0, 0, 1, 1, 2, 2]);
/// });
/// ```
pub struct Mutex<T: ?Sized> {
    sem: RawSemaphore,
    poison: poison::Flag,
    data: UnsafeCell<T>,
}

// SAFETY: the mutex hands `&mut T` to one holder at a time, possibly on
// another thread: like std, `T: Send` suffices for both.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

/// Access to the data of a locked [`Mutex`]; unlocks on drop.
///
/// Like std's, a guard stays on the thread that took it (`!Send`) — and a
/// fiber never changes threads, so a fiber may keep it across parks.
///
/// ```compile_fail
/// static M: fibra::sync::Mutex<i32> = fibra::sync::Mutex::new(0);
/// let guard = M.lock().unwrap();
/// std::thread::spawn(move || drop(guard)); // `MutexGuard` is not `Send`
/// ```
#[must_use = "the mutex is unlocked as soon as the guard is dropped"]
pub struct MutexGuard<'a, T: ?Sized + 'a> {
    pub(crate) mutex: &'a Mutex<T>,
    poison: poison::Guard,
    _not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard only gives `&T`.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T> Mutex<T> {
    const_unless_loom! {
        /// A new, unlocked mutex.
        ///
        /// ```
        /// let m = fibra::sync::Mutex::new(5);
        /// assert_eq!(*m.lock().unwrap(), 5);
        /// ```
        pub fn new(value: T) -> Mutex<T> {
            Mutex {
                sem: RawSemaphore::new(1),
                poison: poison::Flag::new(),
                data: UnsafeCell::new(value),
            }
        }
    }

    /// The data, consuming the mutex.
    ///
    /// ```
    /// let m = fibra::sync::Mutex::new(String::from("x"));
    /// assert_eq!(m.into_inner().unwrap(), "x");
    /// ```
    pub fn into_inner(self) -> LockResult<T> {
        poison::map_result(&self.poison, self.data.into_inner())
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Waits for the lock: parks the fiber, or blocks the thread.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`](std::sync::PoisonError) holding the guard if a
    /// holder unwound while holding the lock.
    ///
    /// ```
    /// let m = fibra::sync::Mutex::new(0);
    /// *m.lock().unwrap() += 1;
    /// assert_eq!(*m.lock().unwrap(), 1);
    /// ```
    #[inline]
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        self.sem
            .acquire(1, None, &"Mutex::lock")
            .expect("no deadline, no time-out");
        self.guard()
    }

    /// Takes the lock if it is free and nobody waits for it.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`] if it is taken (or others wait), and
    /// [`TryLockError::Poisoned`] as for [`lock`](Self::lock).
    ///
    /// ```
    /// let m = fibra::sync::Mutex::new(0);
    /// let held = m.lock().unwrap();
    /// assert!(m.try_lock().is_err());
    /// drop(held);
    /// assert!(m.try_lock().is_ok());
    /// ```
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        if !self.sem.try_acquire(1) {
            // A fiber spinning on it gives way now and then (`fair.rs`).
            crate::scheduler::fair::futile();
            return Err(TryLockError::WouldBlock);
        }
        Ok(self.guard()?)
    }

    /// Waits at most `timeout` for the lock; `None` if it did not come.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let m = fibra::sync::Mutex::new(0);
    /// let held = m.lock().unwrap();
    /// assert!(m.lock_timeout(Duration::from_millis(5)).is_none());
    /// ```
    pub fn lock_timeout(&self, timeout: Duration) -> Option<LockResult<MutexGuard<'_, T>>> {
        let deadline = clock::after_ns(timeout);
        self.sem
            .acquire(1, Some(deadline), &"Mutex::lock_timeout")
            .ok()?;
        Some(self.guard())
    }

    fn guard(&self) -> LockResult<MutexGuard<'_, T>> {
        let guard = MutexGuard {
            mutex: self,
            poison: self.poison.guard(),
            _not_send: PhantomData,
        };
        poison::map_result(&self.poison, guard)
    }

    /// Whether a holder unwound while holding the lock.
    ///
    /// ```
    /// let m = fibra::sync::Mutex::new(0);
    /// assert!(!m.is_poisoned());
    /// ```
    pub fn is_poisoned(&self) -> bool {
        self.poison.get()
    }

    /// Marks the mutex as not poisoned any more.
    ///
    /// ```
    /// let m = fibra::sync::Mutex::new(0);
    /// m.clear_poison();
    /// assert!(!m.is_poisoned());
    /// ```
    pub fn clear_poison(&self) {
        self.poison.clear();
    }

    /// The data, through the exclusive borrow (no locking needed).
    ///
    /// ```
    /// let mut m = fibra::sync::Mutex::new(1);
    /// *m.get_mut().unwrap() = 2;
    /// assert_eq!(*m.lock().unwrap(), 2);
    /// ```
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        poison::map_result(&self.poison, self.data.get_mut())
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.mutex.poison.done(&self.poison);
        self.mutex.sem.release(1);
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves the lock is held, so no `&mut T` exists.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves the lock is held, exclusively by us.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Mutex<T> {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(value: T) -> Mutex<T> {
        Mutex::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Ok(guard) => d.field("data", &&*guard),
            Err(TryLockError::Poisoned(e)) => d.field("data", &&**e.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.poison.get())
            .finish_non_exhaustive()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}
