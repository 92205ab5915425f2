//! [`EventFd`]: a counter in the kernel that fibers and threads can wait on.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::arch::syscall::{result, syscall6};
use crate::io::{Interest, wait};

/// A Linux eventfd: `write` adds to a 64-bit counter, `read` waits until it
/// is non-zero, then returns it and resets it to zero.
///
/// `read` parks a fiber (or blocks a thread) while the counter is zero;
/// `write` from any thread, fiber or process (through the fd) wakes it.
/// `EventFd` is `Send + Sync`: share it with an `Arc`.
///
/// ```
/// use std::sync::Arc;
/// use fibra::io::EventFd;
///
/// let efd = Arc::new(EventFd::new(0)?);
/// let e = efd.clone();
/// let t = std::thread::spawn(move || {
///     e.write(2).unwrap();
///     e.write(3).unwrap();
/// });
/// fibra::run(|| {
///     let mut total = 0;
///     while total < 5 {
///         total += efd.read().unwrap(); // parks this fiber until written
///     }
///     assert_eq!(total, 5);
/// });
/// t.join().unwrap();
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// An eventfd whose counter starts at `initial`.
    ///
    /// # Errors
    ///
    /// When the kernel refuses a new fd (e.g. at the open-file limit), or
    /// `InvalidInput` for `u64::MAX` (the counter holds at most `u64::MAX - 1`).
    ///
    /// ```
    /// let efd = fibra::io::EventFd::new(7)?;
    /// assert_eq!(efd.read()?, 7);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new(initial: u64) -> io::Result<EventFd> {
        // SAFETY: eventfd returns a new fd we own, or -1 (checked).
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let efd = EventFd {
            // SAFETY: `fd` was just created and is owned by nobody else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        };
        if initial > 0 {
            efd.write(initial)?;
        }
        Ok(efd)
    }

    /// Adds `n` to the counter, waking a reader. If the counter would exceed
    /// `u64::MAX - 1`, waits until a reader makes room.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for `n == u64::MAX`.
    ///
    /// ```
    /// let efd = fibra::io::EventFd::new(0)?;
    /// efd.write(1)?;
    /// efd.write(1)?;
    /// assert_eq!(efd.read()?, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write(&self, n: u64) -> io::Result<()> {
        if n == u64::MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an eventfd cannot be incremented by u64::MAX",
            ));
        }
        loop {
            let buf = n.to_ne_bytes();
            // SAFETY: writing 8 bytes from a valid buffer to our own fd. (The
            // system call itself, not libc's `write`: with the `hook` feature
            // that would ask the kernel more than once.)
            let rc = unsafe {
                syscall6(
                    libc::SYS_write,
                    self.raw(),
                    buf.as_ptr() as usize,
                    8,
                    0,
                    0,
                    0,
                )
            };
            match result(rc) {
                Ok(8) => return Ok(()),
                Ok(_) => {}
                Err(e) => self.would_block(e, Interest::WRITABLE)?,
            }
        }
    }

    /// Waits until the counter is non-zero, then returns it and resets it to
    /// zero.
    ///
    /// ```
    /// let efd = fibra::io::EventFd::new(3)?;
    /// assert_eq!(efd.read()?, 3);
    /// assert_eq!(efd.try_read()?, None);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn read(&self) -> io::Result<u64> {
        loop {
            if let Some(n) = self.try_read()? {
                return Ok(n);
            }
            wait(self.fd.as_raw_fd(), Interest::READABLE, None)?;
        }
    }

    /// Returns and resets the counter if it is non-zero, without waiting.
    ///
    /// ```
    /// let efd = fibra::io::EventFd::new(0)?;
    /// assert_eq!(efd.try_read()?, None);
    /// efd.write(4)?;
    /// assert_eq!(efd.try_read()?, Some(4));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_read(&self) -> io::Result<Option<u64>> {
        let mut buf = [0u8; 8];
        // SAFETY: reading 8 bytes into a valid buffer from our own fd (the
        // system call itself, as in `write`).
        let rc = unsafe {
            syscall6(
                libc::SYS_read,
                self.raw(),
                buf.as_mut_ptr() as usize,
                8,
                0,
                0,
                0,
            )
        };
        let err = match result(rc) {
            Ok(_) => return Ok(Some(u64::from_ne_bytes(buf))),
            Err(e) => e,
        };
        match err.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            io::ErrorKind::Interrupted => self.try_read(),
            _ => Err(err),
        }
    }

    /// The fd as the system calls take it.
    fn raw(&self) -> usize {
        self.fd.as_raw_fd() as usize
    }

    fn would_block(&self, err: io::Error, interest: Interest) -> io::Result<()> {
        match err.kind() {
            io::ErrorKind::WouldBlock => wait(self.fd.as_raw_fd(), interest, None).map(drop),
            io::ErrorKind::Interrupted => Ok(()),
            _ => Err(err),
        }
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
