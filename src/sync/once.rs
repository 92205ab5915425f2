//! [`OnceLock`]: std's lazily initialised cell, for fibers and threads
//! alike ([`LazyLock`](crate::sync::LazyLock) is one beside its function).
//!
//! std's cells block a second thread while the first initialises; these
//! *park* a second fiber instead (its runtime runs other fibers meanwhile),
//! and block a plain thread. That is what makes them the safe home of a
//! value that takes a blocking call to make — a connection, say — where a
//! `thread_local!` initializer must not block at all (see the crate docs,
//! "Thread-locals").
//!
//! ## How
//!
//! A state word says whether the cell is empty, being initialised, or full.
//! The caller that moves it from empty to initialising runs the initializer
//! with no lock held; everyone else who finds it initialising links a node
//! into the cell's wait list (under the cell's internal lock, which is
//! never held across user code or a park) and parks until the initializer
//! is done. The initializer publishes the value with a release store of the
//! state and serves every waiter under the same lock, so none can check
//! the state, find it initialising and then miss the wake-up. A panicking
//! initializer leaves the cell empty, wakes the waiters, and the first of
//! them to run tries its own initializer.

use crate::sync::waiters::Mutex as InnerLock;
use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::atomic::{AtomicU8, Ordering};

use crate::scheduler::wakeups::Wakeups;
use crate::sync::waiters::{Node, WaitList, lock, park_until_served};

/// No value, and nobody is making one.
const EMPTY: u8 = 0;
/// An initializer runs.
const RUNNING: u8 = 1;
/// The value is in (and stays until the cell is dropped or taken by
/// `&mut`).
const FULL: u8 = 2;

/// A cell written once: the first caller of [`get_or_init`] runs its
/// initializer, and others that come meanwhile wait — a fiber parks, a
/// thread blocks — until the value is there. std's `OnceLock`, for fibers.
///
/// Usable from fibers of any runtime and from plain threads, in any mix;
/// `Send` and `Sync` on the same terms as std's. The initializer runs on the
/// caller's own stack and may block (park) itself: that is the point.
///
/// Calling [`get_or_init`] on the same cell from inside its own initializer
/// waits forever, as std's deadlocks.
///
/// [`get_or_init`]: OnceLock::get_or_init
///
/// Shared between threads only when `T` may be (as std's):
///
/// ```compile_fail
/// fn shared<T: Sync>() {}
/// shared::<fibra::sync::OnceLock<std::cell::Cell<u8>>>();
/// ```
///
/// ```
/// use std::time::Duration;
/// use fibra::sync::OnceLock;
///
/// static CONFIG: OnceLock<String> = OnceLock::new();
///
/// fibra::run(|| {
///     let fibers: Vec<_> = (0..4)
///         .map(|_| {
///             fibra::spawn(|| {
///                 CONFIG.get_or_init(|| {
///                     fibra::sleep(Duration::from_millis(5)); // fetch it, say
///                     "loaded".to_string()
///                 })
///                 .len()
///             })
///         })
///         .collect();
///     for f in fibers {
///         assert_eq!(f.join().unwrap(), 6);
///     }
/// });
/// assert_eq!(CONFIG.get().map(String::as_str), Some("loaded"));
/// ```
pub struct OnceLock<T> {
    state: AtomicU8,
    /// Who waits for the initializer (see the module docs).
    waiters: InnerLock<WaitList<()>>,
    value: UnsafeCell<MaybeUninit<T>>,
    /// Dropping the cell may drop a `T`.
    _owns: PhantomData<T>,
}

// SAFETY: as std's `OnceLock`. Sharing the cell hands out `&T` (so `T:
// Sync`) and lets any thread run the initializer that stores the `T` (so
// `T: Send`). The wait list holds unparkers, which are `Send + Sync`.
unsafe impl<T: Sync + Send> Sync for OnceLock<T> {}
// SAFETY: sending the cell sends the `T` it may hold; the wait list is
// empty whenever the cell can be moved (waiters borrow the cell).
unsafe impl<T: Send> Send for OnceLock<T> {}

impl<T: RefUnwindSafe + UnwindSafe> RefUnwindSafe for OnceLock<T> {}
impl<T: UnwindSafe> UnwindSafe for OnceLock<T> {}

impl<T> OnceLock<T> {
    const_unless_loom! {
        /// An empty cell.
        ///
        /// ```
        /// static CELL: fibra::sync::OnceLock<u32> = fibra::sync::OnceLock::new();
        /// assert_eq!(CELL.get(), None);
        /// ```
        pub fn new() -> OnceLock<T> {
            OnceLock {
                state: AtomicU8::new(EMPTY),
                waiters: InnerLock::new(WaitList::new()),
                value: UnsafeCell::new(MaybeUninit::uninit()),
                _owns: PhantomData,
            }
        }
    }

    /// The value, if it has been set; never waits.
    ///
    /// ```
    /// let cell = fibra::sync::OnceLock::new();
    /// assert_eq!(cell.get(), None);
    /// cell.set(7).unwrap();
    /// assert_eq!(cell.get(), Some(&7));
    /// ```
    ///
    /// A fiber that polls an empty cell in a loop, waiting for another
    /// fiber of its thread to set it, gives way now and then (as a failed
    /// channel `try_recv` does: see `scheduler/fair.rs`).
    #[inline]
    pub fn get(&self) -> Option<&T> {
        let value = self.value();
        if value.is_none() {
            crate::scheduler::fair::futile();
        }
        value
    }

    /// [`get`](Self::get) without counting a miss.
    #[inline]
    pub(crate) fn value(&self) -> Option<&T> {
        if self.state.load(Ordering::Acquire) == FULL {
            // SAFETY: FULL, seen with acquire, means the value was written
            // before the release store of FULL and is never written again
            // while the cell is shared.
            Some(unsafe { (*self.value.get()).assume_init_ref() })
        } else {
            None
        }
    }

    /// The value, mutably, if it has been set.
    ///
    /// ```
    /// let mut cell = fibra::sync::OnceLock::from(1);
    /// *cell.get_mut().unwrap() += 1;
    /// assert_eq!(cell.get(), Some(&2));
    /// ```
    #[inline]
    pub fn get_mut(&mut self) -> Option<&mut T> {
        if *self.state.get_mut() == FULL {
            // SAFETY: FULL means initialised; `&mut self` is exclusive.
            Some(unsafe { self.value.get_mut().assume_init_mut() })
        } else {
            None
        }
    }

    /// The value, waiting (parked, in a fiber) while another caller's
    /// initializer runs; `None` only if nobody set it — but see
    /// [`OnceLock::wait`] to wait for a value in any case.
    fn get_after_running(&self) -> Option<&T> {
        loop {
            match self.state.load(Ordering::Acquire) {
                RUNNING => self.wait_while_running(),
                _ => return self.value(),
            }
        }
    }

    /// Waits until the cell has a value, and returns it. Parks a fiber,
    /// blocks a thread; wakes when some caller's initializer (or `set`)
    /// succeeds.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use fibra::sync::OnceLock;
    ///
    /// fibra::run(|| {
    ///     let cell = Arc::new(OnceLock::new());
    ///     let reader = {
    ///         let cell = cell.clone();
    ///         fibra::spawn(move || *cell.wait())
    ///     };
    ///     fibra::yield_now();
    ///     cell.set(5).unwrap();
    ///     assert_eq!(reader.join().unwrap(), 5);
    /// });
    /// ```
    pub fn wait(&self) -> &T {
        self.wait_unless(|| false)
            .expect("waits until there is a value")
    }

    /// [`wait`](Self::wait), or `None` once `give_up` says so: it is asked
    /// under the wait list's lock, so a `give_up` made true before an
    /// initializer's end (which takes that lock to wake everyone) is seen.
    pub(crate) fn wait_unless(&self, give_up: impl Fn() -> bool) -> Option<&T> {
        loop {
            if let Some(value) = self.value() {
                return Some(value);
            }
            let guard = lock(&self.waiters);
            if self.state.load(Ordering::Acquire) == FULL {
                continue;
            }
            if give_up() {
                return None;
            }
            self.park_in(guard);
        }
    }

    /// Sets the value if the cell is empty; otherwise gives `value` back.
    /// Waits if another caller's initializer is running, to know which.
    ///
    /// # Errors
    ///
    /// `Err(value)` when the cell already had a value.
    ///
    /// ```
    /// let cell = fibra::sync::OnceLock::new();
    /// assert_eq!(cell.set(1), Ok(()));
    /// assert_eq!(cell.set(2), Err(2));
    /// ```
    pub fn set(&self, value: T) -> Result<(), T> {
        let mut value = Some(value);
        self.get_or_init(|| value.take().expect("runs once"));
        match value {
            None => Ok(()),
            Some(value) => Err(value),
        }
    }

    /// The value; if the cell is empty, runs `f` to make it first. Only one
    /// initializer runs at a time: other callers meanwhile wait (a fiber
    /// parks) and then return the value it made.
    ///
    /// If `f` panics, the panic goes to its caller and the cell stays
    /// empty; a caller waiting meanwhile then runs its own `f`.
    ///
    /// ```
    /// let cell = fibra::sync::OnceLock::new();
    /// assert_eq!(*cell.get_or_init(|| 1), 1);
    /// assert_eq!(*cell.get_or_init(|| 2), 1);
    /// ```
    pub fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
        match self.get_or_try_init(|| Ok::<T, std::convert::Infallible>(f())) {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }

    /// Like [`get_or_init`](OnceLock::get_or_init) with an initializer
    /// that may fail: an `Err` is returned to its caller and leaves the
    /// cell empty (the next caller tries again).
    ///
    /// # Errors
    ///
    /// What `f` returned, when this call ran `f` and it failed.
    ///
    /// ```
    /// let cell = fibra::sync::OnceLock::new();
    /// assert_eq!(cell.get_or_try_init(|| Err("down")), Err("down"));
    /// assert_eq!(cell.get_or_try_init(|| Ok::<_, &str>(3)), Ok(&3));
    /// ```
    pub fn get_or_try_init<E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        if let Some(value) = self.value() {
            return Ok(value);
        }
        self.initialize(f)
    }

    #[cold]
    fn initialize<E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        loop {
            match self
                .state
                .compare_exchange(EMPTY, RUNNING, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(FULL) => return Ok(self.value().expect("full")),
                Err(_) => {
                    if let Some(value) = self.get_after_running() {
                        return Ok(value);
                    }
                }
            }
        }
        // This caller is the initializer. If `f` unwinds (a panic, or the
        // fiber's cancellation), the cell goes back to empty and the
        // waiters are woken to try theirs.
        struct Reset<'a, T>(&'a OnceLock<T>);
        impl<T> Drop for Reset<'_, T> {
            fn drop(&mut self) {
                self.0.finish(EMPTY);
            }
        }
        let reset = Reset(self);
        let result = f();
        std::mem::forget(reset);
        match result {
            Ok(value) => {
                // SAFETY: RUNNING is ours: nobody else reads or writes the
                // value until the release store of FULL in `finish`.
                unsafe { (*self.value.get()).write(value) };
                self.finish(FULL);
                // SAFETY: just written, and FULL.
                Ok(unsafe { (*self.value.get()).assume_init_ref() })
            }
            Err(e) => {
                self.finish(EMPTY);
                Err(e)
            }
        }
    }

    /// Ends the initializer's run with `state` (FULL or EMPTY) and wakes
    /// every waiter. The store is made under the lock, so a waiter that
    /// saw RUNNING under it is linked already and is served here.
    fn finish(&self, state: u8) {
        let mut wakeups = Wakeups::default();
        {
            let mut waiters = lock(&self.waiters);
            self.state.store(state, Ordering::Release);
            waiters.take_all_into(&mut wakeups, |_| ());
        }
        wakeups.wake();
    }

    /// Parks the caller until the running initializer ends (at once if it
    /// has ended).
    fn wait_while_running(&self) {
        let guard = lock(&self.waiters);
        if self.state.load(Ordering::Acquire) != RUNNING {
            return;
        }
        self.park_in(guard);
    }

    /// Links a node into the wait list held by `guard` and parks until
    /// `finish` serves it. A waiter that gives up (cancelled, unwinding)
    /// owes nobody anything: every waiter is served at once.
    fn park_in(&self, guard: crate::sync::waiters::MutexGuard<'_, WaitList<()>>) {
        let node = Node::new(());
        let _ = park_until_served(
            &self.waiters,
            guard,
            |list| list,
            &node,
            None,
            &"OnceLock::get_or_init",
            || {},
            |_, _| {},
        );
    }

    /// The value, taking it out of the cell (which is empty after).
    ///
    /// ```
    /// let mut cell = fibra::sync::OnceLock::from("x");
    /// assert_eq!(cell.take(), Some("x"));
    /// assert_eq!(cell.get(), None);
    /// ```
    pub fn take(&mut self) -> Option<T> {
        if *self.state.get_mut() != FULL {
            return None;
        }
        *self.state.get_mut() = EMPTY;
        // SAFETY: it was FULL (initialised); the state now says empty, so
        // it is read out exactly once.
        Some(unsafe { self.value.get_mut().assume_init_read() })
    }

    /// The value, if it was set.
    ///
    /// ```
    /// let cell = fibra::sync::OnceLock::from(String::from("v"));
    /// assert_eq!(cell.into_inner().as_deref(), Some("v"));
    /// ```
    pub fn into_inner(mut self) -> Option<T> {
        self.take()
    }
}

impl<T> Drop for OnceLock<T> {
    fn drop(&mut self) {
        if *self.state.get_mut() == FULL {
            // SAFETY: FULL: initialised, and dropped once, here.
            unsafe { self.value.get_mut().assume_init_drop() };
        }
    }
}

impl<T> Default for OnceLock<T> {
    fn default() -> OnceLock<T> {
        OnceLock::new()
    }
}

impl<T> From<T> for OnceLock<T> {
    fn from(value: T) -> OnceLock<T> {
        let cell = OnceLock::new();
        let _ = cell.set(value);
        cell
    }
}

impl<T: Clone> Clone for OnceLock<T> {
    fn clone(&self) -> OnceLock<T> {
        match self.value() {
            Some(value) => OnceLock::from(value.clone()),
            None => OnceLock::new(),
        }
    }
}

impl<T: PartialEq> PartialEq for OnceLock<T> {
    fn eq(&self, other: &OnceLock<T>) -> bool {
        self.value() == other.value()
    }
}

impl<T: Eq> Eq for OnceLock<T> {}

impl<T: fmt::Debug> fmt::Debug for OnceLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_tuple("OnceLock");
        match self.value() {
            Some(value) => d.field(value),
            None => d.field(&format_args!("<uninit>")),
        };
        d.finish()
    }
}
