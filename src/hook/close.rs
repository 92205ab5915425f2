//! `close`, `dup2` and `dup3`: an fd number that is closed is forgotten
//! (see `fds`), so the socket that reuses it is a new one to the hooks and
//! to the reactor. Hooked on every thread; outside fibers the cost is a
//! load and a swap in the fd table.

use libc::c_int;

use super::{fds, sys, wait};

/// Forgets `fd`: in the table, and its registration in this thread's
/// runtime (while the fd is still open, so epoll lets go of it too).
fn forget(fd: c_int) {
    if let Some(uid) = fds::forget(fd)
        && let Some(core) = super::parkable()
    {
        wait::forget(core, fd, uid);
    }
}

/// close(2).
///
/// # Safety
///
/// As close(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    forget(fd);
    // SAFETY: the caller's contract, passed to the kernel.
    let r = unsafe { sys::call(libc::SYS_close, &[fd as usize]) };
    // Again: a hook on another thread may have looked the fd up in between.
    fds::forget(fd);
    sys::ret(r) as c_int
}

/// dup2(2): `new` is closed first if open.
///
/// # Safety
///
/// As dup2(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if old != new {
        forget(new);
    }
    // SAFETY: the caller's contract, passed to the kernel.
    let r = unsafe { sys::call(libc::SYS_dup2, &[old as usize, new as usize]) };
    if old != new {
        fds::forget(new);
    }
    sys::ret(r) as c_int
}

/// dup3(2): `new` is closed first if open.
///
/// # Safety
///
/// As dup3(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if old != new {
        forget(new);
    }
    // SAFETY: the caller's contract, passed to the kernel.
    let r = unsafe {
        sys::call(
            libc::SYS_dup3,
            &[old as usize, new as usize, flags as usize],
        )
    };
    fds::forget(new);
    sys::ret(r) as c_int
}
