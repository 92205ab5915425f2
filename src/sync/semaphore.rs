//! [`Semaphore`], with its permit guards [`Permit`] (borrowing) and
//! [`OwnedPermit`] (holding an `Arc`): the public face of
//! [`RawSemaphore`](crate::sync::raw_semaphore::RawSemaphore).

use std::sync::Arc;
use std::time::Duration;

use crate::sync::raw_semaphore::{MAX_PERMITS, RawSemaphore};
use crate::timer::clock;

/// A counting semaphore: at most `n` holders of a [`Permit`] at once.
/// Waiters are served in the order they came (FIFO), so none starves.
///
/// A fiber waiting for a permit parks (its runtime runs other fibers); a
/// thread blocks. Fibers of any runtime and threads may share one
/// semaphore. Taking a free permit, or returning one nobody waits for, is a
/// single atomic operation.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use fibra::sync::Semaphore;
///
/// fibra::run(|| {
///     let connections = Arc::new(Semaphore::new(2)); // at most 2 at a time
///     let fibers: Vec<_> = (0..6)
///         .map(|_| {
///             let connections = connections.clone();
///             fibra::spawn(move || {
///                 let _permit = connections.acquire();
///                 fibra::sleep(Duration::from_millis(5)); // "use a connection"
///             })
///         })
///         .collect();
///     for f in fibers {
///         f.join().unwrap();
///     }
///     assert_eq!(connections.available_permits(), 2);
/// });
/// ```
pub struct Semaphore {
    raw: RawSemaphore,
}

/// A permit of a [`Semaphore`], returned to it on drop.
#[must_use = "the permit is returned as soon as it is dropped"]
pub struct Permit<'a> {
    semaphore: &'a Semaphore,
}

impl Semaphore {
    const_unless_loom! {
        /// A semaphore with `permits` free permits; zero is fine (permits can be
        /// added later with [`add_permits`](Self::add_permits)).
        ///
        /// # Panics
        ///
        /// If `permits` exceeds `usize::MAX / 8`.
        ///
        /// ```
        /// let s = fibra::sync::Semaphore::new(0);
        /// assert!(s.try_acquire().is_none());
        /// s.add_permits(1);
        /// assert!(s.try_acquire().is_some());
        /// ```
        pub fn new(permits: usize) -> Semaphore {
            Semaphore {
                raw: RawSemaphore::new(permits),
            }
        }
    }

    /// Waits for a permit: parks the fiber, or blocks the thread.
    ///
    /// ```
    /// let s = fibra::sync::Semaphore::new(1);
    /// let p = s.acquire();
    /// assert_eq!(s.available_permits(), 0);
    /// drop(p);
    /// assert_eq!(s.available_permits(), 1);
    /// ```
    pub fn acquire(&self) -> Permit<'_> {
        self.raw
            .acquire(1, None, &"Semaphore::acquire")
            .expect("no deadline, no time-out");
        Permit { semaphore: self }
    }

    /// A permit if one is free and nobody is waiting for one.
    ///
    /// ```
    /// let s = fibra::sync::Semaphore::new(1);
    /// let p = s.try_acquire().unwrap();
    /// assert!(s.try_acquire().is_none());
    /// ```
    pub fn try_acquire(&self) -> Option<Permit<'_>> {
        // `then`, not `then_some`: a `Permit` built for a failed attempt
        // would be dropped, and its drop returns a permit never taken.
        let got = self.raw.try_acquire(1);
        if !got {
            // A fiber spinning on it gives way now and then (`fair.rs`).
            crate::scheduler::fair::futile();
        }
        got.then(|| Permit { semaphore: self })
    }

    /// Waits at most `timeout` for a permit.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let s = fibra::sync::Semaphore::new(0);
    /// assert!(s.acquire_timeout(Duration::from_millis(10)).is_none());
    /// ```
    pub fn acquire_timeout(&self, timeout: Duration) -> Option<Permit<'_>> {
        let deadline = clock::after_ns(timeout);
        self.raw
            .acquire(1, Some(deadline), &"Semaphore::acquire_timeout")
            .ok()
            .map(|()| Permit { semaphore: self })
    }

    /// Adds `n` permits, serving waiters first.
    ///
    /// # Panics
    ///
    /// If the count would exceed `usize::MAX / 8`.
    ///
    /// ```
    /// let s = fibra::sync::Semaphore::new(0);
    /// s.add_permits(3);
    /// assert_eq!(s.available_permits(), 3);
    /// ```
    pub fn add_permits(&self, n: usize) {
        assert!(
            n <= MAX_PERMITS - self.raw.available(),
            "Semaphore::add_permits: more than usize::MAX / 8 permits"
        );
        self.raw.release(n);
    }

    /// Waits for a permit that owns a reference to the semaphore, so it can
    /// move anywhere — into a spawned fiber, onto another thread — and
    /// returns its permit when dropped there (tokio's name).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use fibra::sync::Semaphore;
    ///
    /// fibra::run(|| {
    ///     let slots = Arc::new(Semaphore::new(2));
    ///     let workers: Vec<_> = (0..6)
    ///         .map(|_| {
    ///             // Taken here, before the fiber exists: at most 2 run at once.
    ///             let permit = slots.clone().acquire_owned();
    ///             fibra::spawn(move || {
    ///                 fibra::sleep(Duration::from_millis(5));
    ///                 drop(permit);
    ///             })
    ///         })
    ///         .collect();
    ///     for w in workers {
    ///         w.join().unwrap();
    ///     }
    ///     assert_eq!(slots.available_permits(), 2);
    /// });
    /// ```
    pub fn acquire_owned(self: Arc<Self>) -> OwnedPermit {
        self.raw
            .acquire(1, None, &"Semaphore::acquire_owned")
            .expect("no deadline, no time-out");
        OwnedPermit {
            semaphore: Some(self),
        }
    }

    /// An owned permit (see [`acquire_owned`](Self::acquire_owned)) if one
    /// is free and nobody is waiting for one.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let s = Arc::new(fibra::sync::Semaphore::new(1));
    /// let p = s.clone().try_acquire_owned().unwrap();
    /// assert!(s.clone().try_acquire_owned().is_none());
    /// std::thread::spawn(move || drop(p)).join().unwrap();
    /// assert_eq!(s.available_permits(), 1);
    /// ```
    pub fn try_acquire_owned(self: Arc<Self>) -> Option<OwnedPermit> {
        // (`then`: see `try_acquire`.)
        let got = self.raw.try_acquire(1);
        if !got {
            crate::scheduler::fair::futile();
        }
        got.then(|| OwnedPermit {
            semaphore: Some(self),
        })
    }

    /// The permits free right now (zero while anyone waits).
    ///
    /// ```
    /// assert_eq!(fibra::sync::Semaphore::new(4).available_permits(), 4);
    /// ```
    pub fn available_permits(&self) -> usize {
        self.raw.available()
    }
}

impl Permit<'_> {
    /// Keeps the permit taken for good: it is not returned on drop.
    ///
    /// ```
    /// let s = fibra::sync::Semaphore::new(1);
    /// s.acquire().forget();
    /// assert_eq!(s.available_permits(), 0);
    /// ```
    pub fn forget(self) {
        std::mem::forget(self);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.semaphore.raw.release(1);
    }
}

/// A permit of a [`Semaphore`] that holds an `Arc` of it, so it is
/// `'static` and `Send`: it moves into spawned fibers and onto threads, and
/// is returned to the semaphore on drop (tokio's `OwnedSemaphorePermit`).
#[must_use = "the permit is returned as soon as it is dropped"]
pub struct OwnedPermit {
    /// `None` once forgotten (then nothing is returned on drop).
    semaphore: Option<Arc<Semaphore>>,
}

impl OwnedPermit {
    /// The semaphore this permit belongs to.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let s = Arc::new(fibra::sync::Semaphore::new(1));
    /// let p = s.clone().acquire_owned();
    /// assert!(Arc::ptr_eq(p.semaphore(), &s));
    /// ```
    pub fn semaphore(&self) -> &Arc<Semaphore> {
        self.semaphore
            .as_ref()
            .expect("a permit is forgotten only as it is consumed")
    }

    /// Keeps the permit taken for good: it is not returned on drop.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let s = Arc::new(fibra::sync::Semaphore::new(1));
    /// s.clone().acquire_owned().forget();
    /// assert_eq!(s.available_permits(), 0);
    /// ```
    pub fn forget(mut self) {
        // The permit stays taken; the reference to the semaphore goes.
        self.semaphore = None;
    }
}

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        if let Some(semaphore) = self.semaphore.take() {
            semaphore.raw.release(1);
        }
    }
}

impl std::fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("semaphore", &self.semaphore())
            .finish()
    }
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("available_permits", &self.available_permits())
            .finish()
    }
}

impl std::fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit").finish_non_exhaustive()
    }
}
