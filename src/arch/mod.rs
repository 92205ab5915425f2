//! The machine-specific half of a context switch.
//!
//! Every architecture file exports the same items, so the rest of the
//! crate never names a register:
//!
//! - [`init_stack`]: build the first switch frame on a fresh stack, so that
//!   switching to it calls `entry(arg, data)` on that stack;
//! - [`init_generator_stack`], [`resume`], [`suspend`]: the same for a
//!   generator, entered like a call and left like its return, in its
//!   caller's FP environment;
//! - [`switch`]: save the running context, resume another one, and return
//!   when something switches back;
//! - [`EntryFn`]: the type of a fiber's first function, which returns its
//!   [`FinalSwitch`]: the context that runs after it, for good;
//! - [`prefetch_frame`]: start loading a suspended context's switch frame
//!   ahead of the switch that resumes it ([`prefetch`], [`prefetch_line`]:
//!   any range, one line);
//! - [`walk_parked`]: let a stack walk started here continue into a
//!   suspended context's frames, for dumps ([`walk_parked_return`]: where
//!   they begin);
//! - [`syscall`]: the kernel called without libc (for the socket calls
//!   of every round trip, and the syscall hooks).
//!
//! Only x86_64 Linux is supported today; the `compile_error!` below says so
//! plainly instead of failing somewhere in the assembler.

#[cfg(target_arch = "x86_64")]
pub(crate) mod syscall;
#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
pub(crate) use x86_64::{
    EntryFn, FinalSwitch, RESUME_PUSHES, SWITCH_PUSHES, check_supported, init_generator_stack,
    init_stack, prefetch, prefetch_frame, prefetch_line, probe_pushes, walk_parked,
    walk_parked_return,
};
#[cfg(all(target_arch = "x86_64", not(fibra_asan)))]
pub(crate) use x86_64::{resume, suspend, switch};

#[cfg(fibra_asan)]
pub(crate) mod asan;

/// The switches, each told to AddressSanitizer (`--cfg fibra_asan` builds).
#[cfg(fibra_asan)]
mod told {
    use super::{asan, x86_64};

    /// See [`x86_64::switch`].
    ///
    /// # Safety
    ///
    /// As for [`x86_64::switch`].
    #[inline(always)]
    pub(crate) unsafe fn switch(save_sp: *mut *mut u8, load_sp: *mut u8, arg: usize) -> usize {
        let fake = asan::before_switch(load_sp);
        // SAFETY: forwarded from the caller.
        let r = unsafe { x86_64::switch(save_sp, load_sp, arg) };
        asan::after_switch(fake);
        r
    }

    /// See [`x86_64::resume`].
    ///
    /// # Safety
    ///
    /// As for [`x86_64::resume`].
    #[inline(always)]
    pub(crate) unsafe fn resume(save_sp: *mut *mut u8, load_sp: *mut u8, arg: usize) -> usize {
        let fake = asan::before_switch(load_sp);
        // SAFETY: forwarded from the caller.
        let r = unsafe { x86_64::resume(save_sp, load_sp, arg) };
        asan::after_switch(fake);
        r
    }

    /// See [`x86_64::suspend`].
    ///
    /// # Safety
    ///
    /// As for [`x86_64::suspend`].
    #[inline(always)]
    pub(crate) unsafe fn suspend(save_sp: *mut *mut u8, load_sp: *mut u8, arg: usize) {
        let fake = asan::before_switch(load_sp);
        // SAFETY: forwarded from the caller.
        unsafe { x86_64::suspend(save_sp, load_sp, arg) };
        asan::after_switch(fake);
    }
}
#[cfg(fibra_asan)]
pub(crate) use told::{resume, suspend, switch};

/// At the first instruction of a new context's entry function (tells
/// AddressSanitizer the switch has arrived; nothing otherwise).
#[inline(always)]
pub(crate) fn entered() {
    #[cfg(fibra_asan)]
    asan::entered();
}

/// Just before an entry function returns its final switch (tells
/// AddressSanitizer this context ends; nothing otherwise).
#[inline(always)]
pub(crate) fn leaving_for_good(_final: &FinalSwitch) {
    #[cfg(fibra_asan)]
    asan::leaving_for_good(_final.load_sp);
}

/// Tells AddressSanitizer about a fiber stack's usable range (nothing
/// otherwise).
#[inline(always)]
pub(crate) fn stack_mapped(_lo: usize, _hi: usize) {
    #[cfg(fibra_asan)]
    asan::register_stack(_lo, _hi);
}

/// Tells AddressSanitizer that `lo..hi` is unmapped (nothing otherwise).
#[inline(always)]
pub(crate) fn range_unmapped(_lo: usize, _hi: usize) {
    #[cfg(fibra_asan)]
    asan::unregister_range(_lo, _hi);
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!("fibra supports x86_64 Linux only (its context switch is x86_64 assembly)");
