//! Waiting for child processes without blocking the runtime.
//!
//! [`wait`] opens a pidfd for the child (Linux ≥ 5.3), which turns readable
//! when the child exits, and awaits it like any fd; only then does it reap
//! the child with `Child::wait`, which no longer blocks.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, ExitStatus};

use crate::io::{Interest, wait as wait_fd};

/// Waits for `child` to exit and returns its status, parking the fiber
/// meanwhile (on a plain thread, blocking the thread). Like
/// [`Child::wait`], it closes the child's stdin first.
///
/// # Errors
///
/// When the child was already reaped, or the kernel refuses a pidfd.
///
/// ```
/// use std::process::Command;
///
/// fibra::run(|| {
///     let mut child = Command::new("sh").args(["-c", "sleep 0.05; exit 3"]).spawn().unwrap();
///     let ticker = fibra::spawn(|| fibra::sleep(std::time::Duration::from_millis(10)));
///     let status = fibra::process::wait(&mut child).unwrap(); // the ticker runs meanwhile
///     assert_eq!(status.code(), Some(3));
///     ticker.join().unwrap();
/// });
/// ```
pub fn wait(child: &mut Child) -> io::Result<ExitStatus> {
    drop(child.stdin.take());
    if let Some(status) = child.try_wait()? {
        return Ok(status);
    }
    let pid = child.id() as libc::pid_t;
    // pidfd_open has no memory-safety precondition; the result is
    // checked. The pid is our child's and not reaped by `Child` yet, so it
    // names that child unless something else reaped it (SIGCHLD ignored,
    // another thread's `waitpid(-1)`) and the pid was reused: then we wait
    // for the wrong process and `child.wait()` below reports ECHILD.
    // SAFETY: as argued just above.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd that we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd) };
    wait_fd(pidfd.as_raw_fd(), Interest::READABLE, None)?;
    child.wait()
}
