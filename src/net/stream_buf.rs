//! [`StreamBuf`]: one stream transfer's buffer and direction, in two
//! words, and the system call that moves it.

use std::io;
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::ptr::NonNull;

/// The buffer of a [`Registration::transfer`](super::registration::Registration::transfer), and so its direction: `recv`
/// into it, or `send` it (with `MSG_NOSIGNAL`: a closed peer is `EPIPE`,
/// never a SIGPIPE).
///
/// Two words (the start, and the length with the direction in its low bit),
/// so that it is passed in registers: as an enum of two slices it was three,
/// which the caller wrote to its own frame to pass by reference: a
/// socket's `read` kept a frame of four words for it, two now (its return
/// address and the stack's alignment), and a fiber waiting in a read has
/// half a line less of stack to come back through, cold, when it wakes.
pub(crate) struct StreamBuf<'a> {
    ptr: NonNull<u8>,
    /// `len << 1 | send` (a slice's length is at most `isize::MAX`).
    len_send: usize,
    /// A `recv` buffer is borrowed mutably; a `send` one is never written.
    _buf: PhantomData<&'a mut [u8]>,
}

const _: () = assert!(size_of::<StreamBuf<'static>>() == 16);

impl<'a> StreamBuf<'a> {
    /// `recv` into `buf`.
    #[inline]
    pub(crate) fn recv(buf: &'a mut [u8]) -> StreamBuf<'a> {
        StreamBuf {
            ptr: NonNull::from(&mut *buf).cast(),
            len_send: buf.len() << 1,
            _buf: PhantomData,
        }
    }

    /// `recv` into `buf`, which may be uninitialized: the kernel writes
    /// the bytes it reports, and reads none.
    #[cfg(feature = "tokio-io")]
    #[inline]
    pub(crate) fn recv_uninit(buf: &'a mut [std::mem::MaybeUninit<u8>]) -> StreamBuf<'a> {
        StreamBuf {
            ptr: NonNull::from(&mut *buf).cast(),
            len_send: buf.len() << 1,
            _buf: PhantomData,
        }
    }

    /// `send` `buf`.
    #[inline]
    pub(crate) fn send(buf: &'a [u8]) -> StreamBuf<'a> {
        StreamBuf {
            ptr: NonNull::from(buf).cast(),
            len_send: buf.len() << 1 | 1,
            _buf: PhantomData,
        }
    }

    #[inline]
    pub(crate) fn is_send(&self) -> bool {
        self.len_send & 1 != 0
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len_send >> 1
    }

    /// `recv(fd, buf, 0)` or `send(fd, buf, MSG_NOSIGNAL)`, as std's socket
    /// `read` and `write` make them, but calling the kernel directly:
    /// libc's wrappers are cancellation points, which in a process of
    /// several threads cost two calls more each (see `arch::syscall`).
    #[inline]
    pub(crate) fn call(&mut self, fd: RawFd) -> io::Result<usize> {
        let (nr, flags) = if self.is_send() {
            (libc::SYS_sendto, libc::MSG_NOSIGNAL as usize)
        } else {
            (libc::SYS_recvfrom, 0)
        };
        let (ptr, len) = (self.ptr.as_ptr() as usize, self.len());
        // `ptr..ptr + len` is the buffer `self` borrows (made from a slice
        // of that length by `recv` or `send`): valid for writes (`recv`,
        // whose buffer is borrowed mutably) or reads (`send`) while this
        // runs; a bad fd is an error (EBADF), not undefined behaviour.
        // SAFETY: as argued just above.
        let r = unsafe { crate::arch::syscall::syscall6(nr, fd as usize, ptr, len, flags, 0, 0) };
        crate::arch::syscall::result(r)
    }
}
