//! poll(2) for one context's wait on a plain thread: what `io::wait`
//! without a runtime and a `select` with fds on a thread are made of.

use std::io;
use std::os::fd::RawFd;

use crate::io::Interest;

/// A `pollfd` for `interest` on `fd`.
pub(crate) fn pollfd(fd: RawFd, interest: Interest) -> libc::pollfd {
    let mut events = 0;
    if interest.is_readable() {
        events |= libc::POLLIN;
    }
    if interest.is_writable() {
        events |= libc::POLLOUT;
    }
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// poll(2) on `fds` for at most `timeout_ms` (-1: no limit), retried when
/// interrupted; the number of fds with events.
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    loop {
        // SAFETY: `fds` is a valid array of pollfds of the length given.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// What a polled `pfd` reports for `interest`: the readiness (an error or
/// hang-up counts as ready, as `fibra::io::wait` reports it), an error for
/// an fd that is not open, or `None`.
pub(crate) fn revents(pfd: &libc::pollfd, interest: Interest) -> Option<io::Result<Interest>> {
    if pfd.revents & libc::POLLNVAL != 0 {
        return Some(Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("fd {} is not open", pfd.fd),
        )));
    }
    let mut ready = Interest::EMPTY;
    if pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
        ready = ready | Interest::READABLE;
    }
    if pfd.revents & (libc::POLLOUT | libc::POLLERR) != 0 {
        ready = ready | Interest::WRITABLE;
    }
    let ready = ready & interest;
    (!ready.is_empty()).then_some(Ok(ready))
}
