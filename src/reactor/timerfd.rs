//! The timerfds that make the epoll fd readable when a timer is due.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A new non-blocking CLOCK_MONOTONIC timerfd.
pub(super) fn new_timerfd() -> io::Result<OwnedFd> {
    // SAFETY: timerfd_create returns a new fd we own, or -1 (checked).
    unsafe {
        let fd = libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Sets `timerfd` to fire once, at `at` (absolute CLOCK_MONOTONIC ns).
pub(super) fn set_timerfd(timerfd: &OwnedFd, at: u64) {
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (at / 1_000_000_000) as libc::time_t,
            // A zero it_value disarms; time 0 never occurs on a real clock.
            tv_nsec: (at % 1_000_000_000).max(u64::from(at == 0)) as libc::c_long,
        },
    };
    // SAFETY: a valid timerfd and a valid itimerspec.
    let rc = unsafe {
        libc::timerfd_settime(
            timerfd.as_raw_fd(),
            libc::TFD_TIMER_ABSTIME,
            &spec,
            std::ptr::null_mut(),
        )
    };
    debug_assert_eq!(rc, 0, "timerfd_settime failed");
}
