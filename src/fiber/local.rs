//! Fiber-local storage: [`fiber_local!`](crate::fiber_local) and
//! [`FiberLocal`].
//!
//! ## Where the values live, and why `&T` stays valid
//!
//! A spawned fiber's values are boxed in [`Locals`], a map made on first
//! use and kept by a pointer in the fiber's `Meta` at the top of its own
//! stack (see `scheduler::watch`), keyed by the address of their `static`
//! key. Only that fiber touches them, on its
//! thread, while it runs; every access is a short borrow of the map that
//! ends before user code runs (an initializer, the caller's closure, a
//! value's `Drop`), so such code may use other keys (or spawn, park, log).
//!
//! - A box is never removed or replaced while its fiber's closure runs, so
//!   the `&T` handed to `with`'s closure stays valid for the call, whatever
//!   the closure does; a value boxed by a re-entrant initializer of the same
//!   key wins, and the outer one is dropped.
//! - The closure runs with its stack pinned (`stack::pin`): a generator
//!   cannot suspend it and resume it on another fiber later.
//! - At the fiber's end ([`teardown`]), after its closure returned (or
//!   unwound), the map is marked destroying and its values are taken out
//!   and dropped one by one, with no borrow live. Meanwhile `try_with`
//!   gives [`AccessError`] and `with` panics, as std's `LocalKey` does
//!   during thread-local destruction: a destructor never sees freed memory.
//! - A fiber's end looks for values only while some fiber of its runtime
//!   has a map (`Core::has_fiber_locals`, a count of the maps alive): the
//!   many fibers of a program that uses no fiber-local pay one compare.
//!   It looks twice, before the fiber's result goes to its handle and
//!   after (a detached fiber's result is dropped there, and its `Drop` may
//!   make values anew); once the fiber's record is `Done` (its trace
//!   events at the very end), no value is made any more.
//!
//! Code not in a spawned fiber (`block_on`'s closure, a plain thread) uses a
//! `thread_local!` made by the macro beside the key.

use std::fmt;

use crate::scheduler::context;
use crate::scheduler::core::Core;
use crate::scheduler::locals::Locals;
use crate::scheduler::watch::Meta;
use crate::stack::pin::StackPin;

/// A key of fiber-local storage, made by [`fiber_local!`](crate::fiber_local):
/// each fiber gets its own value, made on its first use and dropped when
/// the fiber ends (or is cancelled).
///
/// ```
/// use std::cell::Cell;
///
/// fibra::fiber_local! {
///     static COUNT: Cell<u32> = Cell::new(0);
/// }
///
/// fibra::run(|| {
///     let a = fibra::spawn(|| {
///         COUNT.with(|c| c.set(c.get() + 1));
///         fibra::yield_now();
///         COUNT.with(|c| c.get())
///     });
///     let b = fibra::spawn(|| {
///         COUNT.with(|c| c.set(c.get() + 10));
///         fibra::yield_now();
///         COUNT.with(|c| c.get())
///     });
///     assert_eq!((a.join().unwrap(), b.join().unwrap()), (1, 10));
/// });
/// ```
pub struct FiberLocal<T: 'static> {
    init: fn() -> T,
    thread: WithThread<T>,
}

/// Calls its argument with the thread's value; false during the thread's
/// destruction of its thread-locals.
type WithThread<T> = fn(&mut dyn FnMut(&T)) -> bool;

/// The error of [`FiberLocal::try_with`] while the fiber's values are being
/// dropped (from a value's own destructor), or while the thread's are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessError;

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a fiber-local value used while the fiber's values are being dropped")
    }
}

impl std::error::Error for AccessError {}

impl<T: 'static> FiberLocal<T> {
    #[doc(hidden)]
    pub const fn __new(init: fn() -> T, thread: WithThread<T>) -> FiberLocal<T> {
        FiberLocal { init, thread }
    }

    /// Calls `f` with the calling fiber's value, made first if this fiber
    /// has none yet. Outside a spawned fiber, with the thread's value.
    ///
    /// # Panics
    ///
    /// From a fiber-local value's destructor while its fiber ends (see
    /// [`try_with`](Self::try_with)); when the initializer panics.
    ///
    /// ```
    /// fibra::fiber_local!(static NAME: String = "unset".to_string());
    ///
    /// NAME.with(|n| assert_eq!(n, "unset")); // a thread's value
    /// ```
    #[track_caller]
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        match self.try_with(f) {
            Ok(r) => r,
            Err(e) => panic!("fibra::FiberLocal::with: {e}"),
        }
    }

    /// Like [`with`](Self::with), but an [`AccessError`] instead of a
    /// panic when the values are being dropped.
    ///
    /// # Errors
    ///
    /// From the destructor of a fiber-local value of a fiber that is
    /// ending (or of a thread-local of a thread that is).
    ///
    /// ```
    /// fibra::fiber_local!(static N: u8 = 7);
    ///
    /// fibra::run(|| {
    ///     let h = fibra::spawn(|| N.try_with(|n| *n));
    ///     assert_eq!(h.join().unwrap(), Ok(7));
    /// });
    /// ```
    pub fn try_with<R>(&'static self, f: impl FnOnce(&T) -> R) -> Result<R, AccessError> {
        let Some((core, meta)) =
            context::current().and_then(|core| Some((core, core.current_meta()?)))
        else {
            return self.thread_with(f);
        };
        let key = std::ptr::from_ref(self) as usize;
        let value = match find::<T>(meta, key)? {
            Some(value) => value,
            None => {
                let made = Box::new((self.init)());
                insert(core, meta, key, made)?
            }
        };
        let _pin = StackPin::new();
        // `value` points into a box of this fiber's map, which stays
        // there until `teardown`, after the fiber's closure (and so this
        // call) has returned; the pin keeps a generator from carrying this
        // frame elsewhere (see the module docs).
        // SAFETY: as argued just above.
        Ok(f(unsafe { &*value }))
    }

    fn thread_with<R>(&'static self, f: impl FnOnce(&T) -> R) -> Result<R, AccessError> {
        let mut f = Some(f);
        let mut out = None;
        let ok = (self.thread)(&mut |v| {
            if let Some(f) = f.take() {
                out = Some(f(v));
            }
        });
        match out {
            Some(r) if ok => Ok(r),
            _ => Err(AccessError),
        }
    }
}

impl<T: 'static> fmt::Debug for FiberLocal<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FiberLocal { .. }")
    }
}

/// The map of the fiber whose `Meta` is `meta`, made (on `core`, the
/// fiber's runtime) if `make` is given, for a short borrow; `Err` once the
/// fiber's values are being dropped, or once it has ended.
///
/// # Safety
///
/// `meta` is the running spawned fiber's (from `current_meta`); the borrow
/// ends before any user code runs and before another is made.
#[allow(clippy::mut_from_ref)]
unsafe fn locals<'a>(
    meta: *const Meta,
    make: Option<&Core>,
) -> Result<Option<&'a mut Locals>, AccessError> {
    // SAFETY: forwarded from the caller: the fiber's `Meta` is on its live
    // stack (it runs), and only the fiber touches `locals`.
    let cell = unsafe { &(*meta).locals };
    let mut map = cell.get();
    if map.is_null() {
        let Some(core) = make else {
            return Ok(None);
        };
        if core.current_has_ended() {
            return Err(AccessError); // its end was looked at already
        }
        core.count_fiber_locals(1);
        map = Box::into_raw(Box::new(Locals {
            destroying: false,
            entries: Vec::new(),
        }));
        cell.set(map);
    }
    // SAFETY: a non-null pointer is the fiber's boxed map, freed only by
    // `teardown` after it cleared the cell; one borrow at a time (caller's
    // contract).
    let map = unsafe { &mut *map };
    if map.destroying {
        return Err(AccessError);
    }
    Ok(Some(map))
}

fn find<T: 'static>(meta: *const Meta, key: usize) -> Result<Option<*const T>, AccessError> {
    // SAFETY: `meta` is the running fiber's (`current_meta`); short borrow.
    let Some(l) = (unsafe { locals(meta, None) })? else {
        return Ok(None);
    };
    Ok(l.entries
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.downcast_ref::<T>())
        .map(std::ptr::from_ref))
}

fn insert<T: 'static>(
    core: &Core,
    meta: *const Meta,
    key: usize,
    made: Box<T>,
) -> Result<*const T, AccessError> {
    if let Some(existing) = find::<T>(meta, key)? {
        drop(made); // a re-entrant initializer came first; no borrow is live
        return Ok(existing);
    }
    let at = std::ptr::from_ref::<T>(&made);
    // SAFETY: `meta` is the running fiber's (`current_meta`); short borrow,
    // no user code in it (a `Vec` push).
    match unsafe { locals(meta, Some(core)) } {
        Ok(Some(l)) => {
            l.entries.push((key, made));
            Ok(at)
        }
        _ => Err(AccessError), // (`made` is dropped with no borrow live)
    }
}

/// Marks a fiber's values as being dropped; whether it has any to drop
/// (then call [`teardown`]).
pub(crate) fn begin_teardown(meta: *const Meta) -> bool {
    // SAFETY: called by the fiber itself at its end (`meta` is its own).
    let map = unsafe { &(*meta).locals }.get();
    if map.is_null() {
        return false;
    }
    // SAFETY: the fiber's boxed map (see `locals`); short borrow.
    unsafe { (*map).destroying = true };
    true
}

/// Drops a fiber's values at its end (on `core`, its runtime): see the
/// module docs.
pub(crate) fn teardown(core: &Core, meta: *const Meta) {
    // SAFETY: called by the fiber itself at its end (`meta` is its own).
    let cell = unsafe { &(*meta).locals };
    let map = cell.get();
    if map.is_null() {
        return;
    }
    loop {
        // SAFETY: the fiber's boxed map (see `locals`); short borrow, ended
        // before the value's `Drop` runs (which gets `AccessError`s: the
        // map is marked destroying).
        let entry = unsafe {
            (*map).destroying = true;
            (*map).entries.pop()
        };
        match entry {
            Some(entry) => drop(entry),
            None => break,
        }
    }
    cell.set(std::ptr::null_mut());
    // SAFETY: made by `Box::into_raw` in `locals`; the cell no longer
    // points at it, so no one reaches it any more; it is empty (no user
    // code in its drop).
    drop(unsafe { Box::from_raw(map) });
    core.count_fiber_locals(-1);
}

/// Declares fiber-local keys, in the shape of `std::thread_local!`: each
/// spawned fiber gets its own value, made lazily by the initializer on
/// first use, and dropped when the fiber ends or is cancelled (after its
/// closure has returned or unwound). Code that is not in a spawned fiber
/// (`block_on`'s closure, a plain thread) gets its thread's value.
///
/// Unlike a `thread_local!`, its initializer may block (park): the value
/// is the fiber's own, so no other fiber can race to make it.
///
/// ```
/// use std::cell::RefCell;
///
/// fibra::fiber_local! {
///     static TRAIL: RefCell<Vec<&'static str>> = RefCell::new(Vec::new());
///     pub static DEPTH: u32 = 0;
/// }
///
/// fibra::run(|| {
///     let h = fibra::spawn(|| {
///         TRAIL.with(|t| t.borrow_mut().push("start"));
///         fibra::yield_now();
///         TRAIL.with(|t| t.borrow().len())
///     });
///     TRAIL.with(|t| assert!(t.borrow().is_empty())); // the thread's own
///     assert_eq!(h.join().unwrap(), 1);
///     assert_eq!(DEPTH.with(|d| *d), 0);
/// });
/// ```
#[macro_export]
macro_rules! fiber_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => {
        $crate::fiber_local!($(#[$attr])* $vis static $name: $t = $init);
        $crate::fiber_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => {
        $(#[$attr])*
        $vis static $name: $crate::FiberLocal<$t> = {
            fn __fibra_init() -> $t {
                $init
            }
            fn __fibra_thread(f: &mut dyn FnMut(&$t)) -> bool {
                ::std::thread_local! {
                    static VALUE: $t = __fibra_init();
                }
                VALUE.try_with(|v| f(v)).is_ok()
            }
            $crate::FiberLocal::__new(__fibra_init, __fibra_thread)
        };
    };
}
