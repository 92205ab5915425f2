//! [`RwLock`]: std's reader-writer lock, for fibers and threads alike.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::{LockResult, TryLockError, TryLockResult};

use crate::sync::poison;
use crate::sync::raw_semaphore::RawSemaphore;

/// How many readers may hold the lock at once; a writer takes them all.
const READERS: usize = 1 << 30;

/// A reader-writer lock with std's interface: many readers or one writer.
/// Waiting parks the fiber (or blocks the thread).
///
/// Requests are served in FIFO order: a writer waiting for the lock holds
/// back the readers that come after it, so writers are never starved by a
/// stream of readers (and readers queued behind a writer get in together
/// once it is done). A writer that unwinds poisons the lock, as in std.
///
/// ```
/// use std::sync::Arc;
/// use fibra::sync::RwLock;
///
/// fibra::run(|| {
///     let config = Arc::new(RwLock::new(String::from("v1")));
///     let reader = {
///         let config = config.clone();
///         fibra::spawn(move || config.read().unwrap().clone())
///     };
///     *config.write().unwrap() = String::from("v2");
///     assert_eq!(reader.join().unwrap(), "v2");
/// });
/// ```
pub struct RwLock<T: ?Sized> {
    sem: RawSemaphore,
    poison: poison::Flag,
    data: UnsafeCell<T>,
}

// SAFETY: a writer gets `&mut T` (possibly on another thread): `T: Send`.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: readers on several threads share `&T`: `T: Sync` too, as std.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

/// Shared access to the data of an [`RwLock`]; releases on drop.
///
/// Covariant in `T`, as std's: a guard of an `RwLock<&'long U>` may be
/// used where a guard of `&'short U` is expected (it only ever gives
/// shared access). The write guard, like std's, is invariant.
///
/// ```
/// use fibra::sync::{RwLock, RwLockReadGuard};
///
/// fn use_both<'a>(_: RwLockReadGuard<'_, &'a i32>, _: &'a i32) {}
///
/// let long = 5;
/// let lock = RwLock::new(&long);
/// {
///     let short = 6;
///     use_both(lock.read().unwrap(), &short); // `&'long i32` shortened
/// }
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct RwLockReadGuard<'a, T: ?Sized + 'a> {
    /// The data, as a pointer rather than through `&'a RwLock<T>`, whose
    /// `UnsafeCell<T>` would make the guard invariant in `T`. Also keeps
    /// the guard `!Send`, as std's.
    data: NonNull<T>,
    /// The lock's permits, which do not mention `T`.
    sem: &'a RawSemaphore,
    _borrow: PhantomData<&'a T>,
}

/// Exclusive access to the data of an [`RwLock`]; releases on drop.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct RwLockWriteGuard<'a, T: ?Sized + 'a> {
    lock: &'a RwLock<T>,
    poison: poison::Guard,
    _not_send: PhantomData<*const ()>,
}

// SAFETY: shared guards only give `&T`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Sync> Sync for RwLockWriteGuard<'_, T> {}

impl<T> RwLock<T> {
    const_unless_loom! {
        /// A new, unlocked lock.
        ///
        /// ```
        /// let l = fibra::sync::RwLock::new(1);
        /// assert_eq!(*l.read().unwrap(), 1);
        /// ```
        pub fn new(value: T) -> RwLock<T> {
            RwLock {
                sem: RawSemaphore::new(READERS),
                poison: poison::Flag::new(),
                data: UnsafeCell::new(value),
            }
        }
    }

    /// The data, consuming the lock.
    ///
    /// ```
    /// assert_eq!(fibra::sync::RwLock::new(3).into_inner().unwrap(), 3);
    /// ```
    pub fn into_inner(self) -> LockResult<T> {
        poison::map_result(&self.poison, self.data.into_inner())
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Waits for shared access.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`](std::sync::PoisonError) holding the guard if a
    /// writer unwound while holding the lock.
    ///
    /// ```
    /// let l = fibra::sync::RwLock::new(1);
    /// let (a, b) = (l.read().unwrap(), l.read().unwrap()); // readers share
    /// assert_eq!(*a + *b, 2);
    /// ```
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        self.sem
            .acquire(1, None, &"RwLock::read")
            .expect("no deadline, no time-out");
        self.read_guard()
    }

    /// Shared access if it is free now (no writer holds or waits).
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`], or poisoning as for [`read`](Self::read).
    ///
    /// ```
    /// let l = fibra::sync::RwLock::new(1);
    /// let w = l.write().unwrap();
    /// assert!(l.try_read().is_err());
    /// ```
    pub fn try_read(&self) -> TryLockResult<RwLockReadGuard<'_, T>> {
        if !self.sem.try_acquire(1) {
            // A fiber spinning on it gives way now and then (`fair.rs`).
            crate::scheduler::fair::futile();
            return Err(TryLockError::WouldBlock);
        }
        Ok(self.read_guard()?)
    }

    /// Waits for exclusive access.
    ///
    /// # Errors
    ///
    /// As for [`read`](Self::read).
    ///
    /// ```
    /// let l = fibra::sync::RwLock::new(1);
    /// *l.write().unwrap() += 1;
    /// assert_eq!(*l.read().unwrap(), 2);
    /// ```
    pub fn write(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        self.sem
            .acquire(READERS, None, &"RwLock::write")
            .expect("no deadline, no time-out");
        self.write_guard()
    }

    /// Exclusive access if it is free now.
    ///
    /// # Errors
    ///
    /// As for [`try_read`](Self::try_read).
    ///
    /// ```
    /// let l = fibra::sync::RwLock::new(1);
    /// let r = l.read().unwrap();
    /// assert!(l.try_write().is_err());
    /// ```
    pub fn try_write(&self) -> TryLockResult<RwLockWriteGuard<'_, T>> {
        if !self.sem.try_acquire(READERS) {
            // A fiber spinning on it gives way now and then (`fair.rs`).
            crate::scheduler::fair::futile();
            return Err(TryLockError::WouldBlock);
        }
        Ok(self.write_guard()?)
    }

    fn read_guard(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        poison::map_result(
            &self.poison,
            RwLockReadGuard {
                data: NonNull::new(self.data.get()).expect("UnsafeCell::get is never null"),
                sem: &self.sem,
                _borrow: PhantomData,
            },
        )
    }

    fn write_guard(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        poison::map_result(
            &self.poison,
            RwLockWriteGuard {
                lock: self,
                poison: self.poison.guard(),
                _not_send: PhantomData,
            },
        )
    }

    /// Whether a writer unwound while holding the lock.
    ///
    /// ```
    /// assert!(!fibra::sync::RwLock::new(0).is_poisoned());
    /// ```
    pub fn is_poisoned(&self) -> bool {
        self.poison.get()
    }

    /// Marks the lock as not poisoned any more.
    ///
    /// ```
    /// let l = fibra::sync::RwLock::new(0);
    /// l.clear_poison();
    /// ```
    pub fn clear_poison(&self) {
        self.poison.clear();
    }

    /// The data, through the exclusive borrow (no locking needed).
    ///
    /// ```
    /// let mut l = fibra::sync::RwLock::new(0);
    /// *l.get_mut().unwrap() = 5;
    /// assert_eq!(*l.read().unwrap(), 5);
    /// ```
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        poison::map_result(&self.poison, self.data.get_mut())
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.sem.release(1);
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.poison.done(&self.poison);
        self.lock.sem.release(READERS);
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: `data` points into the lock, which `sem`'s borrow keeps
        // alive; a read permit is held, so no writer (no `&mut T`) exists.
        unsafe { self.data.as_ref() }
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: every permit is held by this guard.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: every permit is held by this guard: access is exclusive.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> RwLock<T> {
        RwLock::new(T::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read() {
            Ok(guard) => d.field("data", &&*guard),
            Err(TryLockError::Poisoned(e)) => d.field("data", &&**e.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.poison.get())
            .finish_non_exhaustive()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
