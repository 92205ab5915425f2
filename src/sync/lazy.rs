//! [`LazyLock`]: std's lazily initialised value, made by its function on
//! first use; a [`OnceLock`] beside the function, so callers that come while
//! the function runs park (a thread blocks) instead of blocking their
//! runtime.

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::Deref;
use std::panic::{RefUnwindSafe, UnwindSafe};

use crate::sync::OnceLock;

/// A value made on first use by a function, once, however many fibers and
/// threads ask at the same time: std's `LazyLock`, where the callers that
/// come while the function runs park (a thread blocks) instead of blocking
/// their runtime. Dereference it, or call [`LazyLock::force`].
///
/// If the function panics, the lock is poisoned, as std's: every later use
/// panics too.
///
/// ```
/// use std::collections::HashMap;
/// use fibra::sync::LazyLock;
///
/// static TABLE: LazyLock<HashMap<u32, &str>> = LazyLock::new(|| {
///     fibra::sleep(std::time::Duration::from_millis(1)); // may block
///     HashMap::from([(1, "one"), (2, "two")])
/// });
///
/// fibra::run(|| {
///     let a = fibra::spawn(|| TABLE[&1]);
///     let b = fibra::spawn(|| TABLE[&2]);
///     assert_eq!((a.join().unwrap(), b.join().unwrap()), ("one", "two"));
/// });
/// ```
pub struct LazyLock<T, F = fn() -> T> {
    cell: OnceLock<T>,
    /// The function, until the initializer (which `cell` runs one at a
    /// time) takes it; `None` after, or after it panicked (poisoned).
    init: UnsafeCell<Option<F>>,
}

// SAFETY: as std's `LazyLock`: `&LazyLock` gives `&T` (T: Sync) and lets
// any thread run `F` once and store the `T` (F: Send, T: Send). `init` is
// touched only by the one initializer `cell` lets run at a time.
unsafe impl<T: Sync + Send, F: Send> Sync for LazyLock<T, F> {}

impl<T: RefUnwindSafe + UnwindSafe, F: UnwindSafe> RefUnwindSafe for LazyLock<T, F> {}

impl<T, F: FnOnce() -> T> LazyLock<T, F> {
    const_unless_loom! {
        /// A lock whose value `f` makes on first use.
        ///
        /// ```
        /// static N: fibra::sync::LazyLock<u64> = fibra::sync::LazyLock::new(|| 6 * 7);
        /// assert_eq!(*N, 42);
        /// ```
        pub fn new(f: F) -> LazyLock<T, F> {
            LazyLock {
                cell: OnceLock::new(),
                init: UnsafeCell::new(Some(f)),
            }
        }
    }

    /// The value, made first if it has not been (see the type's docs).
    ///
    /// # Panics
    ///
    /// If the function panics now, or panicked before (poisoned).
    ///
    /// ```
    /// use fibra::sync::LazyLock;
    ///
    /// let lazy = LazyLock::new(|| vec![1, 2]);
    /// assert_eq!(LazyLock::force(&lazy), &[1, 2]);
    /// ```
    pub fn force(this: &LazyLock<T, F>) -> &T {
        this.cell.get_or_init(|| {
            // SAFETY: `cell` runs one initializer at a time, and only
            // initializers touch `init`: this access is exclusive.
            let f = unsafe { (*this.init.get()).take() };
            match f {
                Some(f) => f(),
                None => panic!("LazyLock instance has previously been poisoned"),
            }
        })
    }

    /// The value if it has been made, else the function.
    ///
    /// # Errors
    ///
    /// `Err(f)` when the value was never made.
    ///
    /// # Panics
    ///
    /// If the lock is poisoned.
    ///
    /// ```
    /// use fibra::sync::LazyLock;
    ///
    /// let lazy = LazyLock::new(|| 1);
    /// assert_eq!(*lazy, 1);
    /// assert_eq!(LazyLock::into_inner(lazy).ok(), Some(1));
    /// ```
    pub fn into_inner(this: LazyLock<T, F>) -> Result<T, F> {
        let LazyLock { cell, init } = this;
        match cell.into_inner() {
            Some(value) => Ok(value),
            None => Err(init
                .into_inner()
                .expect("LazyLock instance has previously been poisoned")),
        }
    }
}

impl<T, F: FnOnce() -> T> Deref for LazyLock<T, F> {
    type Target = T;

    /// As [`LazyLock::force`].
    fn deref(&self) -> &T {
        LazyLock::force(self)
    }
}

impl<T: Default> Default for LazyLock<T> {
    fn default() -> LazyLock<T> {
        LazyLock::new(T::default)
    }
}

impl<T: fmt::Debug, F> fmt::Debug for LazyLock<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_tuple("LazyLock");
        match self.cell.value() {
            Some(value) => d.field(value),
            None => d.field(&format_args!("<uninit>")),
        };
        d.finish()
    }
}
