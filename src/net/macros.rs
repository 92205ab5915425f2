//! What every fibra socket type implements the same way, as macros over
//! its field `sock` (a [`Socket`](crate::net::socket::Socket)): the fd
//! traits, `Read` and `Write` through the loop, and the socket timeouts.

/// The fd traits of a fibra socket type whose field `sock` is a
/// [`Socket`] of std type `$std`: `AsRawFd`, `AsFd`, `IntoRawFd`,
/// `FromRawFd`, `From<OwnedFd>` and `From<T> for OwnedFd` (so a socket
/// made elsewhere — socket2, a parent process — becomes a fibra socket,
/// and back), and `Debug` as std prints it.
macro_rules! fd_traits {
    ($($ty:ty => $std:ty),*) => {$(
        impl std::os::fd::FromRawFd for $ty {
            /// Takes the socket `fd` (made non-blocking for fibra's loop;
            /// see `From<std>`).
            ///
            /// # Safety
            ///
            /// As [`FromRawFd::from_raw_fd`](std::os::fd::FromRawFd::from_raw_fd):
            /// `fd` is an open socket of this kind, owned by nobody else.
            unsafe fn from_raw_fd(fd: std::os::fd::RawFd) -> $ty {
                // SAFETY: the caller's contract.
                <$ty>::from(unsafe { <$std as std::os::fd::FromRawFd>::from_raw_fd(fd) })
            }
        }
        impl From<std::os::fd::OwnedFd> for $ty {
            /// Takes the socket `fd` owns (made non-blocking for fibra's
            /// loop). `fd` must be a socket of this kind, as for std's
            /// conversion.
            fn from(fd: std::os::fd::OwnedFd) -> $ty {
                <$ty>::from(<$std>::from(fd))
            }
        }
        impl From<$ty> for std::os::fd::OwnedFd {
            /// The socket's fd, still in non-blocking mode.
            fn from(socket: $ty) -> std::os::fd::OwnedFd {
                socket.sock.into_inner().into()
            }
        }
        impl $ty {
            /// Moves the socket in or out of non-blocking mode, as std's
            /// `set_nonblocking`: in it, a call that would wait — a read
            /// with nothing to read, an accept with no connection, a write
            /// to a full buffer — returns `WouldBlock` at once instead of
            /// parking the fiber (or blocking the thread). Off by default.
            ///
            /// As std's, the mode is shared by the socket and its
            /// `try_clone`s, both ways. (The fd itself stays non-blocking
            /// for fibra's loop, whatever the mode.)
            ///
            /// # Errors
            ///
            /// None: the `Result` is std's shape.
            pub fn set_nonblocking(&self, nonblocking: bool) -> std::io::Result<()> {
                self.sock.reg.timeouts().set_nonblocking(nonblocking);
                Ok(())
            }
        }
        impl std::fmt::Debug for $ty {
            /// As std prints it: `TcpListener { addr: 127.0.0.1:80, fd: 3 }`.
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(&self.sock.inner, f)
            }
        }
        impl std::os::fd::AsRawFd for $ty {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                self.sock.inner.as_raw_fd()
            }
        }
        impl std::os::fd::AsFd for $ty {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                self.sock.inner.as_fd()
            }
        }
        impl std::os::fd::IntoRawFd for $ty {
            /// The fd, still in non-blocking mode.
            fn into_raw_fd(self) -> std::os::fd::RawFd {
                self.sock.into_inner().into_raw_fd()
            }
        }
    )*};
}
pub(crate) use fd_traits;

/// The bytes one `readv`/`writev` can move for buffers of these lengths:
/// std passes at most `IOV_MAX` (1024 on Linux) of them. Counting more would
/// make a full transfer look short, mark the socket drained, and park the
/// next call for an edge that may never come.
pub(crate) fn vectored_len(lens: impl Iterator<Item = usize>) -> usize {
    lens.take(1024).fold(0usize, usize::saturating_add)
}

/// `Read` and `Write` for a stream type (field `sock`) and for `&` it, all
/// through the loop. Empty buffers return 0 at once, as on a blocking std
/// socket (a non-blocking `recv` of nothing reports `WouldBlock`). A read
/// or write of one buffer is a `recv` or a `send(MSG_NOSIGNAL)` made
/// without libc, both through one function (see
/// [`Registration::transfer`](crate::net::registration::Registration::transfer));
/// vectored ones go through std's. A closed peer is `BrokenPipe`, never a SIGPIPE.
macro_rules! stream_io {
    ($($ty:ty),*) => {$(
        impl std::io::Read for &$ty {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if buf.is_empty() {
                    return Ok(0);
                }
                self.sock
                    .transfer($crate::net::registration::StreamBuf::recv(buf))
            }
            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                if bufs.iter().all(|b| b.is_empty()) {
                    return Ok(0);
                }
                let len = $crate::net::macros::vectored_len(bufs.iter().map(|b| b.len()));
                self.sock
                    .read_stream(len, |mut s| std::io::Read::read_vectored(&mut s, bufs))
            }
        }
        impl std::io::Write for &$ty {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if buf.is_empty() {
                    return Ok(0);
                }
                self.sock
                    .transfer($crate::net::registration::StreamBuf::send(buf))
            }
            fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
                self.sock.write_all(buf)
            }
            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                let len = $crate::net::macros::vectored_len(bufs.iter().map(|b| b.len()));
                self.sock
                    .write_stream(len, |mut s| std::io::Write::write_vectored(&mut s, bufs))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        impl std::io::Read for $ty {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                std::io::Read::read(&mut &*self, buf)
            }
            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                std::io::Read::read_vectored(&mut &*self, bufs)
            }
        }
        impl std::io::Write for $ty {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                std::io::Write::write(&mut &*self, buf)
            }
            fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
                std::io::Write::write_all(&mut &*self, buf)
            }
            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                std::io::Write::write_vectored(&mut &*self, bufs)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
    )*};
}
pub(crate) use stream_io;

/// Readiness without a buffer, for a stream type (field `sock`):
/// `readable`/`writable` park until the stream may be ready, and
/// `try_read`/`try_write` make one call that never parks. Together they let
/// a server wait on many connections without a buffer for each, reading
/// into one it shares (tokio's `readable` and `try_read` do the same).
macro_rules! ready_io {
    ($($ty:ty),*) => {$(
        impl $ty {
            /// Parks the fiber until the stream may be readable: data, its
            /// end or an error is there. Returns at once unless a
            /// [`try_read`](Self::try_read) (or a short read) showed it
            /// empty with no event since, so the next `try_read` may still
            /// say `WouldBlock`: loop on both. The read timeout applies
            /// (then `WouldBlock`). On a thread without a runtime it blocks
            /// the thread.
            ///
            /// A server can wait on many connections this way without a
            /// buffer for each, reading into one buffer per thread:
            ///
            /// ```
            /// use std::cell::RefCell;
            /// use std::io::{ErrorKind, Write};
            ///
            /// thread_local! {
            ///     static BUF: RefCell<Vec<u8>> = RefCell::new(vec![0; 16 * 1024]);
            /// }
            ///
            /// fibra::run(|| {
            ///     let (a, mut b) = fibra::net::UnixStream::pair().unwrap();
            ///     fibra::spawn(move || b.write_all(b"ping").unwrap());
            ///     let got = loop {
            ///         a.readable().unwrap(); // parks; no buffer held
            ///         // try_read never parks: the shared buffer is free again
            ///         // before any other fiber runs.
            ///         let n = BUF.with_borrow_mut(|buf| match a.try_read(buf) {
            ///             Ok(n) => Ok(buf[..n].to_vec()),
            ///             Err(e) => Err(e),
            ///         });
            ///         match n {
            ///             Ok(bytes) => break bytes,
            ///             Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
            ///             Err(e) => panic!("{e}"),
            ///         }
            ///     };
            ///     assert_eq!(got, b"ping");
            /// });
            /// ```
            ///
            /// # Errors
            ///
            /// `WouldBlock` when the read timeout expires; an error
            /// registering the stream with the runtime.
            pub fn readable(&self) -> std::io::Result<()> {
                self.sock.ready($crate::io::Interest::READABLE)
            }

            /// Parks the fiber until the stream may be writable (see
            /// [`readable`](Self::readable); the write timeout applies).
            ///
            /// ```
            /// fibra::run(|| {
            ///     let (a, _b) = fibra::net::UnixStream::pair().unwrap();
            ///     a.writable().unwrap(); // an empty send buffer: at once
            ///     assert_eq!(a.try_write(b"hi").unwrap(), 2);
            /// });
            /// ```
            ///
            /// # Errors
            ///
            /// As [`readable`](Self::readable), with the write timeout.
            pub fn writable(&self) -> std::io::Result<()> {
                self.sock.ready($crate::io::Interest::WRITABLE)
            }

            /// Reads what is there into `buf`, never parking: the bytes
            /// read (0: the stream ended, or `buf` is empty), or
            /// `WouldBlock` when nothing is there yet, after which
            /// [`readable`](Self::readable) waits for more.
            ///
            /// ```
            /// use std::io::Write;
            ///
            /// fibra::run(|| {
            ///     let (a, mut b) = fibra::net::UnixStream::pair().unwrap();
            ///     let err = a.try_read(&mut [0; 8]).unwrap_err();
            ///     assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
            ///     b.write_all(b"hi").unwrap();
            ///     a.readable().unwrap();
            ///     assert_eq!(a.try_read(&mut [0; 8]).unwrap(), 2);
            /// });
            /// ```
            ///
            /// # Errors
            ///
            /// `WouldBlock`; the stream's error.
            pub fn try_read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
                if buf.is_empty() {
                    return Ok(0);
                }
                self.sock.try_stream($crate::io::Interest::READABLE, buf.len(), |s| {
                    $crate::net::registration::StreamBuf::recv(buf)
                        .call(std::os::fd::AsRawFd::as_raw_fd(s))
                })
            }

            /// Writes what the send buffer takes of `buf`, never parking:
            /// the bytes written, or `WouldBlock` when it is full, after
            /// which [`writable`](Self::writable) waits for room. A closed
            /// peer is `BrokenPipe`, never a SIGPIPE.
            ///
            /// ```
            /// fibra::run(|| {
            ///     let (a, b) = fibra::net::UnixStream::pair().unwrap();
            ///     drop(b);
            ///     let err = a.try_write(b"hi").unwrap_err();
            ///     assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
            /// });
            /// ```
            ///
            /// # Errors
            ///
            /// `WouldBlock`; the stream's error.
            pub fn try_write(&self, buf: &[u8]) -> std::io::Result<usize> {
                if buf.is_empty() {
                    return Ok(0);
                }
                self.sock.try_stream($crate::io::Interest::WRITABLE, buf.len(), |s| {
                    $crate::net::registration::StreamBuf::send(buf)
                        .call(std::os::fd::AsRawFd::as_raw_fd(s))
                })
            }
        }
    )*};
}
pub(crate) use ready_io;

/// The read and write timeouts of a socket type (field `sock`), kept in its
/// [`Registration`] (and shared with its clones, as the kernel shares
/// them), and in the kernel too, as std keeps them (where they do nothing
/// for a non-blocking socket, but a socket handed back to std keeps them).
/// An expired timeout is `WouldBlock`, as std reports it on Unix;
/// `Some(Duration::ZERO)` is `InvalidInput`, as in std.
macro_rules! timeouts {
    ($($ty:ty),*) => {$(
        impl $ty {
            /// Sets the read timeout (`None`: wait forever). A read waiting
            /// longer fails with `WouldBlock`, as std's does on Unix.
            ///
            /// As std's (which the kernel keeps), the timeout is the
            /// socket's and its `try_clone`s', set through any of them, and
            /// it stays with the fd when the socket is turned back into a
            /// std one.
            ///
            /// ```
            /// use std::io::Read;
            /// use std::time::Duration;
            ///
            /// fibra::run(|| {
            ///     let (mut a, _b) = fibra::net::UnixStream::pair().unwrap();
            ///     a.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
            ///     assert_eq!(a.read_timeout().unwrap(), Some(Duration::from_millis(10)));
            ///     let err = a.read(&mut [0; 8]).unwrap_err(); // nothing comes
            ///     assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
            /// });
            /// ```
            ///
            /// # Errors
            ///
            /// `InvalidInput` for `Some(Duration::ZERO)`, as std.
            pub fn set_read_timeout(&self, timeout: Option<std::time::Duration>) -> std::io::Result<()> {
                self.sock.inner.set_read_timeout(timeout)?;
                self.sock.reg.timeouts().set_read_timeout(timeout)
            }

            /// Sets the write timeout (see `set_read_timeout`).
            ///
            /// # Errors
            ///
            /// `InvalidInput` for `Some(Duration::ZERO)`, as std.
            pub fn set_write_timeout(&self, timeout: Option<std::time::Duration>) -> std::io::Result<()> {
                self.sock.inner.set_write_timeout(timeout)?;
                self.sock.reg.timeouts().set_write_timeout(timeout)
            }

            /// The read timeout.
            pub fn read_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
                Ok(self.sock.reg.timeouts().read_timeout())
            }

            /// The write timeout.
            pub fn write_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
                Ok(self.sock.reg.timeouts().write_timeout())
            }
        }
    )*};
}
pub(crate) use timeouts;
