//! The kernel, called directly: the "real" call behind every hook.
//!
//! The hooks replace libc's entry points, so they cannot call them; they
//! make the system call themselves, as libc's wrappers do. These helpers
//! return the kernel's answer unchanged (`-errno` on failure) and touch
//! neither `errno` nor memory of their own, so they are async-signal-safe
//! and cost what libc's wrapper costs. Only [`ret`] and [`set_errno`]
//! write `errno`, once, for the caller's final answer.

use libc::{c_int, c_long};

pub(super) use crate::arch::syscall::syscall6 as call6;

/// [`call6`] with fewer arguments (the rest are 0).
///
/// # Safety
///
/// As [`call6`].
#[inline(always)]
pub(super) unsafe fn call(n: c_long, args: &[usize]) -> isize {
    let a = |i: usize| args.get(i).copied().unwrap_or(0);
    // SAFETY: the caller's contract.
    unsafe { call6(n, a(0), a(1), a(2), a(3), a(4), a(5)) }
}

/// Sets `errno` as libc does.
#[inline]
pub(super) fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// A kernel result as libc returns it: `-1` and `errno` on failure.
#[inline]
pub(super) fn ret(r: isize) -> isize {
    if (-4095..0).contains(&r) {
        set_errno(-r as c_int);
        -1
    } else {
        r
    }
}

/// `fcntl(fd, F_GETFL)`: the file status flags, or `-errno`.
pub(super) fn get_fl(fd: c_int) -> isize {
    // SAFETY: F_GETFL reads no memory of ours.
    unsafe { call(libc::SYS_fcntl, &[fd as usize, libc::F_GETFL as usize]) }
}

/// `getsockopt(fd, SOL_SOCKET, opt)` of a `T`, or `-errno`.
pub(super) fn sockopt<T: Copy>(fd: c_int, opt: c_int, mut value: T) -> Result<T, isize> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid for writes of their sizes, and
    // `len` says how big `value` is.
    let r = unsafe {
        call(
            libc::SYS_getsockopt,
            &[
                fd as usize,
                libc::SOL_SOCKET as usize,
                opt as usize,
                (&raw mut value) as usize,
                (&raw mut len) as usize,
            ],
        )
    };
    if r < 0 { Err(r) } else { Ok(value) }
}

/// The file type bits (`S_IFMT`) of `fd`'s `fstat`; `None` if it fails.
pub(super) fn file_type(fd: c_int) -> Option<libc::mode_t> {
    // SAFETY: all-zero is a valid stat, which the call fills.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is valid for writes of a stat.
    let r = unsafe { call(libc::SYS_fstat, &[fd as usize, (&raw mut st) as usize]) };
    (r == 0).then_some(st.st_mode & libc::S_IFMT)
}

/// `poll(fds, n, 0)`: which fds are ready now.
///
/// # Safety
///
/// `fds` points to `n` valid `pollfd`s.
pub(super) unsafe fn poll_now(fds: *mut libc::pollfd, n: libc::nfds_t) -> isize {
    // SAFETY: the caller's contract.
    unsafe { call(libc::SYS_poll, &[fds as usize, n as usize, 0]) }
}

pub(super) const EAGAIN: isize = -(libc::EAGAIN as isize);
