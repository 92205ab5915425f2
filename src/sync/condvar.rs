//! [`Condvar`]: std's condition variable, for fibers and threads alike.

use std::fmt;
use std::sync::{LockResult, PoisonError};

use crate::sync::waiters::Mutex as InnerLock;
use std::time::Duration;

use crate::scheduler::wakeups::Wakeups;
use crate::sync::mutex::MutexGuard;
use crate::sync::waiters::{Node, WaitList, lock, park_until_served};
use crate::timer::clock;

/// A condition variable with std's interface, paired with
/// [`fibra::sync::Mutex`](crate::sync::Mutex). Waiting parks the fiber
/// (or blocks the thread); a fiber and a thread may wait on, and notify,
/// the same condvar.
///
/// Waiters are woken in the order they began to wait, and there are no
/// spurious wake-ups from the condvar itself (a waiter should still check
/// its condition in a loop, or use [`wait_while`](Self::wait_while), since
/// another waiter may have changed it first).
///
/// A fiber unwound out of a wait — cancelled, or its
/// [`fibra::timeout`](crate::timeout) expired — after it was notified
/// passes the notification on to the next waiter, if any, as POSIX asks of
/// a cancelled `pthread_cond_wait`: whether the unwind lands while it is in
/// line or while it parks re-locking the mutex. (A wait that ends by its
/// own [`wait_timeout`](Self::wait_timeout) consumes a notification that
/// came at the same moment, and says so: its `timed_out()` is false.)
///
/// ```
/// use std::sync::Arc;
/// use fibra::sync::{Condvar, Mutex};
///
/// fibra::run(|| {
///     let pair = Arc::new((Mutex::new(false), Condvar::new()));
///     let pair2 = pair.clone();
///     // A plain thread notifies a fiber.
///     std::thread::spawn(move || {
///         let (ready, cv) = &*pair2;
///         *ready.lock().unwrap() = true;
///         cv.notify_one();
///     });
///     let (ready, cv) = &*pair;
///     let ready = cv.wait_while(ready.lock().unwrap(), |ready| !*ready).unwrap();
///     assert!(*ready);
/// });
/// ```
pub struct Condvar {
    waiters: InnerLock<WaitList<()>>,
}

/// Whether a timed wait on a [`Condvar`] ended because time ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// Whether the wait ended by timing out (rather than by a notification).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fibra::sync::{Condvar, Mutex};
    ///
    /// let (m, cv) = (Mutex::new(()), Condvar::new());
    /// let (_g, r) = cv.wait_timeout(m.lock().unwrap(), Duration::from_millis(1)).unwrap();
    /// assert!(r.timed_out());
    /// ```
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

impl Condvar {
    const_unless_loom! {
        /// A new condvar with no waiters.
        ///
        /// ```
        /// let cv = fibra::sync::Condvar::new();
        /// cv.notify_all(); // nobody waits: nothing happens
        /// ```
        pub fn new() -> Condvar {
            Condvar {
                waiters: InnerLock::new(WaitList::new()),
            }
        }
    }

    /// Releases the mutex of `guard`, waits for a notification, and locks
    /// the mutex again.
    ///
    /// # Errors
    ///
    /// A [`PoisonError`] with the guard if the mutex is poisoned when it is
    /// locked again.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use fibra::sync::{Condvar, Mutex};
    ///
    /// fibra::run(|| {
    ///     let state = Arc::new((Mutex::new(0), Condvar::new()));
    ///     let s = state.clone();
    ///     fibra::spawn(move || {
    ///         *s.0.lock().unwrap() = 1;
    ///         s.1.notify_one();
    ///     });
    ///     let mut n = state.0.lock().unwrap();
    ///     while *n == 0 {
    ///         n = state.1.wait(n).unwrap();
    ///     }
    /// });
    /// ```
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
        self.wait_until(guard, None).0
    }

    /// Waits while `condition` holds for the data (checked first, and
    /// after every wake-up, with the lock held).
    ///
    /// # Errors
    ///
    /// As for [`wait`](Self::wait).
    ///
    /// ```
    /// use fibra::sync::{Condvar, Mutex};
    ///
    /// let (m, cv) = (Mutex::new(3), Condvar::new());
    /// let g = cv.wait_while(m.lock().unwrap(), |n| *n == 0).unwrap(); // no wait
    /// assert_eq!(*g, 3);
    /// ```
    pub fn wait_while<'a, T: ?Sized>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: impl FnMut(&mut T) -> bool,
    ) -> LockResult<MutexGuard<'a, T>> {
        while condition(&mut *guard) {
            guard = self.wait(guard)?;
        }
        Ok(guard)
    }

    /// Like [`wait`](Self::wait), for at most `timeout`.
    ///
    /// # Errors
    ///
    /// As for [`wait`](Self::wait).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fibra::sync::{Condvar, Mutex};
    ///
    /// let (m, cv) = (Mutex::new(()), Condvar::new());
    /// let (_g, r) = cv.wait_timeout(m.lock().unwrap(), Duration::from_millis(5)).unwrap();
    /// assert!(r.timed_out());
    /// ```
    pub fn wait_timeout<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let (guard, timed_out) = self.wait_until(guard, Some(clock::after_ns(timeout)));
        let result = WaitTimeoutResult(timed_out);
        match guard {
            Ok(g) => Ok((g, result)),
            Err(e) => Err(PoisonError::new((e.into_inner(), result))),
        }
    }

    /// Waits while `condition` holds, for at most `timeout` in all.
    ///
    /// # Errors
    ///
    /// As for [`wait`](Self::wait).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fibra::sync::{Condvar, Mutex};
    ///
    /// let (m, cv) = (Mutex::new(false), Condvar::new());
    /// let (g, r) = cv
    ///     .wait_timeout_while(m.lock().unwrap(), Duration::from_millis(5), |ready| !*ready)
    ///     .unwrap();
    /// assert!(r.timed_out() && !*g);
    /// ```
    pub fn wait_timeout_while<'a, T: ?Sized>(
        &self,
        mut guard: MutexGuard<'a, T>,
        timeout: Duration,
        mut condition: impl FnMut(&mut T) -> bool,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let deadline = clock::after_ns(timeout);
        loop {
            if !condition(&mut *guard) {
                return Ok((guard, WaitTimeoutResult(false)));
            }
            if clock::now_ns() >= deadline {
                return Ok((guard, WaitTimeoutResult(true)));
            }
            guard = match self.wait_until(guard, Some(deadline)).0 {
                Ok(g) => g,
                Err(e) => return Err(PoisonError::new((e.into_inner(), WaitTimeoutResult(false)))),
            };
        }
    }

    /// The wait itself; also says whether it timed out.
    fn wait_until<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Option<u64>,
    ) -> (LockResult<MutexGuard<'a, T>>, bool) {
        let mutex = guard.mutex;
        let node = Node::new(());
        let served = park_until_served(
            &self.waiters,
            lock(&self.waiters),
            |list| list,
            &node,
            deadline,
            &"Condvar::wait",
            // Release the mutex only once we are in line: a notifier must
            // take the mutex to change the condition, then our lock to
            // notify, so it cannot slip in between and be missed.
            move || drop(guard),
            |mut waiters, served| {
                if served {
                    // Unwinding with a notification: it is the next one's.
                    let next = waiters.pop_front(|_| ());
                    drop(waiters);
                    if let Some(((), unparker)) = next {
                        unparker.unpark();
                    }
                }
            },
        )
        .served();
        // Served, and then unwound (cancelled, or its `fibra::timeout`
        // expired) while parked re-locking the mutex: the notification
        // would die with this waiter, so it goes to the next one, as when
        // a waiter is unwound while still in line (see the type's docs).
        let pass_on = PassOn {
            condvar: self,
            armed: served,
        };
        let relocked = mutex.lock();
        std::mem::forget(pass_on);
        (relocked, !served)
    }

    /// Wakes the waiter that has waited longest, if any.
    ///
    /// ```
    /// fibra::sync::Condvar::new().notify_one();
    /// ```
    pub fn notify_one(&self) {
        let next = lock(&self.waiters).pop_front(|_| ());
        if let Some(((), unparker)) = next {
            unparker.unpark();
        }
    }

    /// Wakes every waiter.
    ///
    /// ```
    /// fibra::sync::Condvar::new().notify_all();
    /// ```
    pub fn notify_all(&self) {
        let mut wakeups = Wakeups::default();
        lock(&self.waiters).take_all_into(&mut wakeups, |_| ());
        wakeups.wake();
    }
}

/// Notifies the next waiter of `condvar` when dropped `armed`: by the
/// unwinding of a waiter that had been notified (forgotten otherwise).
struct PassOn<'c> {
    condvar: &'c Condvar,
    armed: bool,
}

impl Drop for PassOn<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.condvar.notify_one();
        }
    }
}

impl Default for Condvar {
    fn default() -> Condvar {
        Condvar::new()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar").finish_non_exhaustive()
    }
}
