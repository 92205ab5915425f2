//! Awaiting kernel objects: readiness of any fd, and an eventfd.
//!
//! [`wait`] is the Linux form of the Windows "await a kernel handle" call:
//! it parks the calling fiber until an fd is readable or writable, while the
//! runtime runs the other fibers, with no limit on how many fibers wait.

mod eventfd;

pub use eventfd::EventFd;

use std::fmt;
use std::io;
use std::ops::{BitAnd, BitOr};
use std::os::fd::RawFd;
use std::time::Duration;

use crate::runtime::context;
use crate::runtime::core::Core;
use crate::runtime::park::{Parked, WaitOn, park};
use crate::time::clock;

/// Readiness to wait for, or that was found: readable, writable, or both.
///
/// ```
/// use fibra::io::Interest;
///
/// let both = Interest::READABLE | Interest::WRITABLE;
/// assert!(both.is_readable() && both.is_writable());
/// assert!(!Interest::READABLE.is_writable());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Interest(pub(crate) u8);

impl Interest {
    /// Data can be read (or the peer hung up, or an error is pending).
    pub const READABLE: Interest = Interest(1);
    /// Data can be written (or an error is pending).
    pub const WRITABLE: Interest = Interest(2);
    pub(crate) const EMPTY: Interest = Interest(0);

    /// Whether readability is included.
    pub fn is_readable(self) -> bool {
        self.0 & 1 != 0
    }

    /// Whether writability is included.
    pub fn is_writable(self) -> bool {
        self.0 & 2 != 0
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for Interest {
    type Output = Interest;
    fn bitor(self, other: Interest) -> Interest {
        Interest(self.0 | other.0)
    }
}

impl BitAnd for Interest {
    type Output = Interest;
    fn bitand(self, other: Interest) -> Interest {
        Interest(self.0 & other.0)
    }
}

impl fmt::Debug for Interest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.is_readable(), self.is_writable()) {
            (true, true) => f.write_str("READABLE | WRITABLE"),
            (true, false) => f.write_str("READABLE"),
            (false, true) => f.write_str("WRITABLE"),
            (false, false) => f.write_str("(empty)"),
        }
    }
}

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
    let token = core.current_token();
    // SAFETY: on the runtime's thread; short borrow.
    let Some(reg) = unsafe { core.local() }
        .reactor
        .add_waiter(fd, interest, token)?
    else {
        return Ok(interest); // always ready
    };
    /// Removes the waiter however the wait ends, unwinding included.
    struct Registered<'a> {
        core: &'a Core,
        reg: crate::reactor::Registration,
    }
    impl Drop for Registered<'_> {
        fn drop(&mut self) {
            // SAFETY: on the runtime's thread; short borrow.
            unsafe { self.core.local() }.reactor.remove_waiter(self.reg);
        }
    }
    let mut guard = Registered { core, reg };
    loop {
        let parked = park(core, deadline, WaitOn::Fd(fd, interest));
        let token = core.current_token();
        // SAFETY: on the runtime's thread; short borrow, taken after
        // `current_token` (which borrows too) and running no user code.
        let reactor = &mut unsafe { core.local() }.reactor;
        let ready = reactor.ready(guard.reg);
        if !ready.is_empty() {
            return Ok(ready);
        }
        if parked == Parked::TimedOut {
            return Err(io::ErrorKind::TimedOut.into());
        }
        // Woken without readiness: park again, under the new park's token.
        // (A token taken and not parked on is harmless: it is for the next
        // park, which follows at once.)
        reactor.retoken(&mut guard.reg, token);
    }
}

pub(crate) fn wait_on_thread(
    fd: RawFd,
    interest: Interest,
    deadline: Option<u64>,
) -> io::Result<Interest> {
    let mut events = 0;
    if interest.is_readable() {
        events |= libc::POLLIN;
    }
    if interest.is_writable() {
        events |= libc::POLLOUT;
    }
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
        let mut pfd = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            continue; // the deadline check above decides
        }
        if pfd.revents & libc::POLLNVAL != 0 {
            return Err(not_open(fd));
        }
        let mut ready = Interest::EMPTY;
        if pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            ready = ready | Interest::READABLE;
        }
        if pfd.revents & (libc::POLLOUT | libc::POLLERR) != 0 {
            ready = ready | Interest::WRITABLE;
        }
        let ready = ready & interest;
        if !ready.is_empty() {
            return Ok(ready);
        }
    }
}
