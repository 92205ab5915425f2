//! The machine-specific half of a context switch.
//!
//! Every architecture file exports the same items, so the rest of the
//! crate never names a register:
//!
//! - [`init_stack`]: build the first switch frame on a fresh stack, so that
//!   switching to it calls `entry(arg, data)` on that stack;
//! - [`switch`]: save the running context, resume another one, and return
//!   when something switches back;
//! - [`EntryFn`]: the type of a fiber's first function, which returns its
//!   [`FinalSwitch`]: the context that runs after it, for good;
//! - [`prefetch_frame`]: start loading a suspended context's switch frame
//!   ahead of the switch that resumes it.
//!
//! Only x86_64 Linux is supported today; the `compile_error!` below says so
//! plainly instead of failing somewhere in the assembler.

#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
pub(crate) use x86_64::{
    EntryFn, FinalSwitch, init_stack, prefetch_frame, resume, suspend, switch,
};

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!("fibra supports x86_64 Linux only (the switch routine is in asm/x86_64.S)");
