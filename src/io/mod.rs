//! Awaiting kernel objects: readiness of any fd, and an eventfd.
//!
//! [`wait`] is the Linux form of the Windows "await a kernel handle" call:
//! it parks the calling fiber until an fd is readable or writable, while the
//! runtime runs the other fibers, with no limit on how many fibers wait.

mod eventfd;
pub(crate) mod poll;

pub use crate::reactor::Interest;
pub use eventfd::EventFd;

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::scheduler::context;
use crate::scheduler::core::Core;
use crate::scheduler::park::{Parked, park};
use crate::scheduler::readiness::FdWaiter;
use crate::scheduler::wait_on::WaitOn;
use crate::timer::clock;

/// Waits until `fd` is ready for `interest`, or `timeout` passes, and
/// returns the readiness found (a subset of `interest`; a hang-up or error
/// on the fd counts as ready, so the next read or write reports it).
///
/// In a fiber this parks the fiber; on a plain thread it blocks the thread
/// in `poll(2)`. The fd is not owned: `wait` registers it for as long as it
/// waits, and the caller must keep it open meanwhile. Regular files are
/// always ready, as `poll(2)` has it.
///
/// # Errors
///
/// `TimedOut` at the deadline; `InvalidInput` if `fd` is not open.
///
/// ```
/// use std::io::Write;
/// use std::os::fd::AsRawFd;
/// use std::time::Duration;
/// use fibra::io::{wait, Interest};
///
/// fibra::run(|| {
///     let (reader, mut writer) = std::io::pipe().unwrap();
///     let fd = reader.as_raw_fd();
///     // Nothing written yet: times out.
///     let err = wait(fd, Interest::READABLE, Some(Duration::from_millis(5))).unwrap_err();
///     assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
///
///     let w = fibra::spawn(move || writer.write_all(b"hi").unwrap());
///     assert_eq!(wait(fd, Interest::READABLE, None).unwrap(), Interest::READABLE);
///     w.join().unwrap();
/// });
/// ```
pub fn wait(fd: RawFd, interest: Interest, timeout: Option<Duration>) -> io::Result<Interest> {
    if interest.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "fibra::io::wait needs READABLE, WRITABLE or both",
        ));
    }
    if fd < 0 {
        return Err(not_open(fd));
    }
    let deadline = timeout.map(clock::after_ns);
    match context::current() {
        Some(core) => wait_in_fiber(core, fd, interest, deadline),
        None => wait_on_thread(fd, interest, deadline),
    }
}

fn not_open(fd: RawFd) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("fd {fd} is not open"))
}

fn wait_in_fiber(
    core: &Core,
    fd: RawFd,
    interest: Interest,
    deadline: Option<u64>,
) -> io::Result<Interest> {
    let Some(waiter) = FdWaiter::fd(core, fd, interest)? else {
        return Ok(interest); // always ready
    };
    // The waiter is removed when it drops, however the wait ends,
    // unwinding included.
    loop {
        let parked = park(core, deadline, WaitOn::Fd(fd, interest));
        let ready = waiter.ready();
        if !ready.is_empty() {
            return Ok(ready);
        }
        if parked == Parked::TimedOut {
            return Err(io::ErrorKind::TimedOut.into());
        }
        // Woken without readiness: park again, under the new park's token.
        waiter.rearm();
    }
}

pub(crate) fn wait_on_thread(
    fd: RawFd,
    interest: Interest,
    deadline: Option<u64>,
) -> io::Result<Interest> {
    let mut pfd = [poll::pollfd(fd, interest)];
    loop {
        let timeout_ms = match deadline {
            None => -1,
            Some(deadline) => {
                let left = deadline.saturating_sub(clock::now_ns());
                if left == 0 {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                left.div_ceil(1_000_000).min(i32::MAX as u64) as i32
            }
        };
        pfd[0].revents = 0;
        if poll::poll(&mut pfd, timeout_ms)? == 0 {
            continue; // the deadline check above decides
        }
        if let Some(ready) = poll::revents(&pfd[0], interest) {
            return ready;
        }
    }
}
