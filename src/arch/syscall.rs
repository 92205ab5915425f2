//! The kernel, called directly: the `syscall` instruction, without libc's
//! wrapper around it.
//!
//! For the calls fibra makes on every round trip of a socket (and for the
//! syscall hooks, which replace libc's entry points and so cannot call
//! them). libc's `recv` and `send` are cancellation points: in a process of
//! several threads (every fibra runtime has its watchdog) each call turns
//! asynchronous cancellation on and off around the system call, two calls
//! more per socket call that fibra never needs (it does not use
//! `pthread_cancel`).
//!
//! [`syscall6`] returns the kernel's answer unchanged (`-errno` on
//! failure) and touches neither `errno` nor memory of its own: it is
//! async-signal-safe.

use std::arch::asm;

use libc::c_long;

/// A raw system call with up to six arguments; returns the kernel's value
/// (`-errno` on failure).
///
/// # Safety
///
/// The call's own contract: the arguments must be valid for system call
/// `n` (pointers to memory it may read or write, fds the caller may use).
#[inline(always)]
pub(crate) unsafe fn syscall6(
    n: c_long,
    a1: usize,
    a2: usize,
    a3: usize,
    a4: usize,
    a5: usize,
    a6: usize,
) -> isize {
    let ret: isize;
    // the x86_64 Linux system call convention: number in rax,
    // arguments in rdi, rsi, rdx, r10, r8, r9; the kernel returns in rax and
    // clobbers rcx and r11, and uses no user stack. Memory the call reads or
    // writes is the caller's contract (the block is not `nomem`, so the
    // compiler assumes memory changes).
    // SAFETY: as argued just above.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") n as isize => ret,
            in("rdi") a1,
            in("rsi") a2,
            in("rdx") a3,
            in("r10") a4,
            in("r8") a5,
            in("r9") a6,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack, preserves_flags),
        );
    }
    ret
}

/// A kernel answer as a `Result`: the value, or the error it names.
#[inline(always)]
pub(crate) fn result(r: isize) -> std::io::Result<usize> {
    if (-4095..0).contains(&r) {
        Err(std::io::Error::from_raw_os_error(-r as i32))
    } else {
        Ok(r as usize)
    }
}
