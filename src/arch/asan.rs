//! Telling AddressSanitizer about stack switches (sanitizer builds only).
//!
//! ASan keeps, per thread, the bounds of the stack it believes is running;
//! a switch it was not told about makes it see a frame "outside the stack"
//! and its `__asan_handle_no_return` (called on every unwind) gives up or
//! reports false errors. The protocol (`<sanitizer/common_interface_defs.h>`):
//!
//! - just before switching, `__sanitizer_start_switch_fiber(&fake, bottom,
//!   size)` with the bounds of the stack being switched *to*; `fake` keeps
//!   the outgoing context's fake stack (null when that context ends for
//!   good);
//! - just after arriving, `__sanitizer_finish_switch_fiber(fake, ..)` with
//!   what the arriving context saved when it left (null when it is new).
//!
//! The switch routine does not know the bounds of the stack it loads, so
//! the stack layer registers every fiber stack it maps here, and any other
//! stack pointer is on the thread's own stack, whose bounds pthread gives.
//! All of this exists only with `--cfg fibra_asan` (set together with
//! `-Zsanitizer=address`, as `.ci/run` does); normal builds never see it.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ptr;
use std::sync::Mutex;

unsafe extern "C" {
    fn __sanitizer_start_switch_fiber(
        fake_stack_save: *mut *mut c_void,
        bottom: *const c_void,
        size: usize,
    );
    fn __sanitizer_finish_switch_fiber(
        fake_stack_save: *mut c_void,
        bottom_old: *mut *const c_void,
        size_old: *mut usize,
    );
}

/// Fiber stacks mapped now: lowest usable address to one past the highest.
static STACKS: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

thread_local! {
    /// This thread's own stack (bottom, size), once asked.
    static THREAD_STACK: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

/// Records a fiber stack whose usable part is `lo..hi`.
pub(crate) fn register_stack(lo: usize, hi: usize) {
    STACKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(lo, hi);
}

/// Forgets every fiber stack inside `lo..hi` (an unmapped range).
pub(crate) fn unregister_range(lo: usize, hi: usize) {
    let mut stacks = STACKS.lock().unwrap_or_else(|e| e.into_inner());
    let gone: Vec<usize> = stacks.range(lo..hi).map(|(&k, _)| k).collect();
    for k in gone {
        stacks.remove(&k);
    }
}

/// The (bottom, size) of the stack that `sp` points into.
fn bounds_of(sp: *mut u8) -> (*const c_void, usize) {
    let sp = sp as usize;
    let found = STACKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .range(..=sp)
        .next_back()
        .filter(|&(_, &hi)| sp < hi)
        .map(|(&lo, &hi)| (lo, hi - lo));
    let (lo, size) = found.unwrap_or_else(thread_stack);
    (lo as *const c_void, size)
}

/// This thread's own stack, from pthread.
fn thread_stack() -> (usize, usize) {
    if let Some(b) = THREAD_STACK.with(Cell::get) {
        return b;
    }
    let mut addr: *mut c_void = ptr::null_mut();
    let mut size = 0usize;
    // SAFETY: the attribute object is initialised by pthread_getattr_np
    // before it is read, and destroyed once; the out-pointers are valid.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) == 0 {
            libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
            libc::pthread_attr_destroy(&mut attr);
        }
    }
    let b = (addr as usize, size);
    THREAD_STACK.with(|c| c.set(Some(b)));
    b
}

/// Before a switch to the context saved at `load_sp`; the returned token
/// goes to [`after_switch`] when this context runs again.
#[inline(always)]
pub(crate) fn before_switch(load_sp: *mut u8) -> *mut c_void {
    let (bottom, size) = bounds_of(load_sp);
    let mut fake = ptr::null_mut();
    // SAFETY: `fake` is a valid out-pointer; the bounds are those of a
    // mapped stack.
    unsafe { __sanitizer_start_switch_fiber(&mut fake, bottom, size) };
    fake
}

/// After a switch has come back to this context.
#[inline(always)]
pub(crate) fn after_switch(fake: *mut c_void) {
    // SAFETY: `fake` is what `before_switch` saved for this context.
    unsafe { __sanitizer_finish_switch_fiber(fake, ptr::null_mut(), ptr::null_mut()) };
}

/// At the first instruction of a new context's entry function.
pub(crate) fn entered() {
    // SAFETY: a new context has no fake stack to restore.
    unsafe { __sanitizer_finish_switch_fiber(ptr::null_mut(), ptr::null_mut(), ptr::null_mut()) };
}

/// Before a context's final switch to `load_sp`: it never runs again.
pub(crate) fn leaving_for_good(load_sp: *mut u8) {
    let (bottom, size) = bounds_of(load_sp);
    // SAFETY: a null save slot tells ASan this context's fake stack can go.
    unsafe { __sanitizer_start_switch_fiber(ptr::null_mut(), bottom, size) };
}
