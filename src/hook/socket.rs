//! Data calls: `read`, `write` and their vectored forms on sockets and on
//! the other fds epoll can watch (pipes, FIFOs, ttys, eventfds); the
//! `recv*` and `send*` forms on sockets.
//!
//! Each hook makes its call non-blocking for this call only, and on
//! `EAGAIN` parks the fiber if the fd is a blocking one
//! ([`Call`](super::call::Call)). Where the kernel has no non-blocking form
//! of the call for the fd (`EOPNOTSUPP`: a tty, say), the fiber parks
//! until `poll` says it is ready, then makes the call. Anything else — not
//! in a fiber, stdio, a file, a non-blocking call — goes to the kernel
//! unchanged.

use libc::{c_int, c_void, iovec, msghdr, size_t, sockaddr, socklen_t, ssize_t};

use super::call::{Call, Step, hooked, hooked_socket, rw_nowait};
use super::sys;
use crate::io::Interest;

/// read(2).
///
/// # Safety
///
/// As read(2): `buf` is valid for writes of `count` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    let real = || {
        // SAFETY: the caller's contract, passed to the kernel.
        unsafe { sys::call(libc::SYS_read, &[fd as usize, buf as usize, count]) }
    };
    let Some((core, what)) = hooked(fd) else {
        return sys::ret(real());
    };
    let iov = iovec {
        iov_base: buf,
        iov_len: count,
    };
    let mut c = Call::new(core, fd, what, Interest::READABLE);
    let step = c.run(|| {
        // SAFETY: one iovec of the caller's buffer.
        unsafe { rw_nowait(libc::SYS_preadv2, fd, &iov, 1) }
    });
    c.finish(step, real)
}

/// write(2): on a blocking fd, returns when all is written.
///
/// # Safety
///
/// As write(2): `buf` is valid for reads of `count` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    let real = || {
        // SAFETY: the caller's contract, passed to the kernel.
        unsafe { sys::call(libc::SYS_write, &[fd as usize, buf as usize, count]) }
    };
    // A write of nothing reaches the socket all the same (an empty
    // datagram), which `pwritev2` of nothing would not.
    let hooked = hooked(fd).filter(|_| count != 0);
    let Some((core, what)) = hooked else {
        return sys::ret(real());
    };
    let mut c = Call::new(core, fd, what, Interest::WRITABLE);
    let moved = c.run_all(count, |done| {
        let iov = iovec {
            iov_base: buf.cast::<u8>().wrapping_add(done).cast_mut().cast(),
            iov_len: count - done,
        };
        // SAFETY: one iovec of the rest of the caller's buffer (`done <
        // count`); the kernel only reads it.
        unsafe { rw_nowait(libc::SYS_pwritev2, fd, &iov, 1) }
    });
    match moved {
        Some(r) => sys::ret(r),
        None => c.fallback(real),
    }
}

/// readv(2).
///
/// # Safety
///
/// As readv(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    let real = || {
        // SAFETY: the caller's contract, passed to the kernel.
        unsafe { sys::call(libc::SYS_readv, &[fd as usize, iov as usize, cnt as usize]) }
    };
    let Some((core, what)) = hooked(fd) else {
        return sys::ret(real());
    };
    let mut c = Call::new(core, fd, what, Interest::READABLE);
    let step = c.run(|| {
        // SAFETY: the caller's iovecs, as readv(2) would use them.
        unsafe { rw_nowait(libc::SYS_preadv2, fd, iov, cnt) }
    });
    c.finish(step, real)
}

/// writev(2): on a blocking fd, returns when all is written, as the
/// kernel's.
///
/// # Safety
///
/// As writev(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    let real = || {
        // SAFETY: the caller's contract, passed to the kernel.
        unsafe { sys::call(libc::SYS_writev, &[fd as usize, iov as usize, cnt as usize]) }
    };
    let Some((core, what)) = hooked(fd) else {
        return sys::ret(real());
    };
    let mut c = Call::new(core, fd, what, Interest::WRITABLE);
    let step = write_all_vectored(
        &mut c,
        // SAFETY: called once the kernel has read the iovecs: valid.
        || unsafe { iovecs_len(iov, cnt) },
        |done| {
            if done == 0 {
                // SAFETY: the caller's iovecs, as writev(2) would use them.
                return unsafe { rw_nowait(libc::SYS_pwritev2, fd, iov, cnt) };
            }
            // SAFETY: the kernel has read these iovecs: they are valid.
            let rest = unsafe { iovecs_after(iov, cnt, done) };
            // SAFETY: our copy of the rest of the caller's iovecs.
            unsafe { rw_nowait(libc::SYS_pwritev2, fd, rest.as_ptr(), rest.len() as c_int) }
        },
    );
    c.finish(step, real)
}

/// [`Call::run`] for a blocking vectored write (`writev`, a stream's
/// `sendmsg`), which the kernel returns from when all is written:
/// `attempt(done)` writes what is left after `done` bytes — the caller's
/// iovecs as they are when `done` is 0, which the kernel reads (and
/// checks) first; a copy of them less what was written after. `total`,
/// asked once a part is written (the iovecs are valid then), is what they
/// hold. Stops early at an error or the end, returning what was written,
/// as the kernel does.
fn write_all_vectored(
    c: &mut Call<'_>,
    total: impl FnOnce() -> usize,
    mut attempt: impl FnMut(usize) -> isize,
) -> Step {
    let mut done = 0usize;
    let mut total = Some(total);
    let mut len = usize::MAX;
    loop {
        match c.run(|| attempt(done)) {
            Step::Done(r) if r > 0 => {
                done += r as usize;
                if let Some(total) = total.take() {
                    len = total();
                }
                if done >= len {
                    return Step::Done(done as isize);
                }
            }
            step if done == 0 => return step,
            _ => return Step::Done(done as isize),
        }
    }
}

/// The bytes `cnt` iovecs hold.
///
/// # Safety
///
/// `iov` points to `cnt` valid iovecs.
unsafe fn iovecs_len(iov: *const iovec, cnt: c_int) -> usize {
    // SAFETY: the caller's contract.
    let all = unsafe { std::slice::from_raw_parts(iov, cnt.max(0) as usize) };
    all.iter().fold(0usize, |n, v| n.saturating_add(v.iov_len))
}

/// A copy of `cnt` iovecs less their first `done` bytes.
///
/// # Safety
///
/// `iov` points to `cnt` valid iovecs.
unsafe fn iovecs_after(iov: *const iovec, cnt: c_int, done: usize) -> Vec<iovec> {
    // SAFETY: the caller's contract.
    let all = unsafe { std::slice::from_raw_parts(iov, cnt.max(0) as usize) };
    let mut skip = done;
    let mut rest = Vec::with_capacity(all.len());
    for v in all {
        if skip >= v.iov_len {
            skip -= v.iov_len;
            continue;
        }
        rest.push(iovec {
            iov_base: v.iov_base.cast::<u8>().wrapping_add(skip).cast(),
            iov_len: v.iov_len - skip,
        });
        skip = 0;
    }
    rest
}

/// recv(2).
///
/// # Safety
///
/// As recv(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe {
        recvfrom(
            fd,
            buf,
            len,
            flags,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    }
}

/// recvfrom(2); with `MSG_WAITALL`, returns when `len` bytes came.
///
/// # Safety
///
/// As recvfrom(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    addrlen: *mut socklen_t,
) -> ssize_t {
    let call = |buf: *mut c_void, len: usize, flags: c_int| {
        // SAFETY: the caller's contract, passed to the kernel.
        unsafe {
            sys::call6(
                libc::SYS_recvfrom,
                fd as usize,
                buf as usize,
                len,
                flags as usize,
                addr as usize,
                addrlen as usize,
            )
        }
    };
    let real = || call(buf, len, flags);
    // (`MSG_ERRQUEUE` never waits: the kernel's answer is at once.)
    if flags & (libc::MSG_DONTWAIT | libc::MSG_ERRQUEUE) != 0 {
        return sys::ret(real());
    }
    let Some((core, what)) = hooked_socket(fd) else {
        return sys::ret(real());
    };
    let nowait = flags | libc::MSG_DONTWAIT;
    let mut c = Call::new(core, fd, what, Interest::READABLE);
    // `MSG_WAITALL` waits for the whole buffer on a stream only: a
    // datagram socket returns one datagram, as without it.
    if flags & libc::MSG_WAITALL != 0 && is_stream(fd) {
        let moved = if flags & libc::MSG_PEEK != 0 {
            // Peeking moves nothing: each try looks at the stream's start
            // again, and the wait is for more of it to come.
            peek_all(&mut c, fd, len, || call(buf, len, nowait))
        } else {
            c.run_all(len, |done| {
                call(
                    buf.cast::<u8>().wrapping_add(done).cast(),
                    len - done,
                    nowait,
                )
            })
        };
        return match moved {
            Some(r) => sys::ret(r),
            None => c.fallback(real),
        };
    }
    let step = c.run(|| call(buf, len, nowait));
    c.finish(step, real)
}

/// Whether `fd` is a stream socket (`SOCK_STREAM`), where `MSG_WAITALL`
/// waits for the whole buffer.
fn is_stream(fd: c_int) -> bool {
    sys::sockopt(fd, libc::SO_TYPE, 0 as c_int) == Ok(libc::SOCK_STREAM)
}

/// `recv(MSG_PEEK | MSG_WAITALL)` on a stream: `peek` (the whole buffer,
/// without waiting) until it shows `len` bytes, the end of the stream or
/// an error; in between, park until more comes. `None`: make the real
/// call. Where the wait ends early (the socket's timeout, a non-blocking
/// socket), what was seen is returned, as the kernel does.
fn peek_all(
    c: &mut Call<'_>,
    fd: c_int,
    len: usize,
    mut peek: impl FnMut() -> isize,
) -> Option<isize> {
    loop {
        let r = peek();
        let short = r > 0 && (r as usize) < len;
        // Short, and no more will come: the kernel returns what it has.
        if (!short && r != sys::EAGAIN) || (short && reading_ended(fd)) {
            return Some(r);
        }
        match c.wait() {
            Ok(()) => {}
            Err(_) if short => return Some(r),
            Err(Step::Done(e)) => return Some(e),
            Err(Step::Real) => return None,
        }
    }
}

/// Whether the peer of stream socket `fd` has ended its side (or the
/// socket has an error): nothing more will come to read.
fn reading_ended(fd: c_int) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { sys::poll_now(&mut pfd, 1) };
    n > 0 && pfd.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

/// recvmsg(2) (but `MSG_WAITALL` blocks the thread).
///
/// # Safety
///
/// As recvmsg(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    let call = |flags: c_int| {
        // SAFETY: the caller's contract, passed to the kernel.
        unsafe {
            sys::call(
                libc::SYS_recvmsg,
                &[fd as usize, msg as usize, flags as usize],
            )
        }
    };
    if flags & (libc::MSG_DONTWAIT | libc::MSG_WAITALL | libc::MSG_ERRQUEUE) != 0 {
        return sys::ret(call(flags));
    }
    let Some((core, what)) = hooked_socket(fd) else {
        return sys::ret(call(flags));
    };
    let mut c = Call::new(core, fd, what, Interest::READABLE);
    let step = c.run(|| call(flags | libc::MSG_DONTWAIT));
    c.finish(step, || call(flags))
}

/// send(2).
///
/// # Safety
///
/// As send(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { sendto(fd, buf, len, flags, std::ptr::null(), 0) }
}

/// sendto(2): on a blocking socket, returns when all is sent.
///
/// # Safety
///
/// As sendto(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    addr: *const sockaddr,
    addrlen: socklen_t,
) -> ssize_t {
    let call = |done: usize, flags: c_int| {
        // SAFETY: the caller's contract, passed to the kernel.
        unsafe {
            sys::call6(
                libc::SYS_sendto,
                fd as usize,
                buf.cast::<u8>().wrapping_add(done) as usize,
                len - done,
                flags as usize,
                addr as usize,
                addrlen as usize,
            )
        }
    };
    if flags & libc::MSG_DONTWAIT != 0 {
        return sys::ret(call(0, flags));
    }
    let Some((core, what)) = hooked_socket(fd) else {
        return sys::ret(call(0, flags));
    };
    let nowait = flags | libc::MSG_DONTWAIT;
    let mut c = Call::new(core, fd, what, Interest::WRITABLE);
    match c.run_all(len, |done| call(done, nowait)) {
        Some(r) => sys::ret(r),
        None => c.fallback(|| call(0, flags)),
    }
}

/// sendmsg(2): on a blocking stream socket, returns when all is sent, as
/// the kernel's.
///
/// # Safety
///
/// As sendmsg(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    let call = |flags: c_int| {
        // SAFETY: the caller's contract, passed to the kernel.
        unsafe {
            sys::call(
                libc::SYS_sendmsg,
                &[fd as usize, msg as usize, flags as usize],
            )
        }
    };
    if flags & libc::MSG_DONTWAIT != 0 {
        return sys::ret(call(flags));
    }
    let Some((core, what)) = hooked_socket(fd) else {
        return sys::ret(call(flags));
    };
    let mut c = Call::new(core, fd, what, Interest::WRITABLE);
    let nowait = flags | libc::MSG_DONTWAIT;
    let step = write_all_vectored(
        &mut c,
        // SAFETY: called once the kernel has read the message: valid.
        || unsafe { iovecs_len((*msg).msg_iov, (*msg).msg_iovlen as c_int) },
        |done| {
            if done == 0 {
                return call(nowait);
            }
            // The rest of a stream's message: its iovecs less what was
            // sent, and no control data (sent with the first part).
            // SAFETY: the kernel has read the message: it is valid.
            let mut m = unsafe { *msg };
            // SAFETY: as above, its iovecs too.
            let rest = unsafe { iovecs_after(m.msg_iov, m.msg_iovlen as c_int, done) };
            m.msg_iov = rest.as_ptr().cast_mut();
            m.msg_iovlen = rest.len() as _;
            m.msg_control = std::ptr::null_mut();
            m.msg_controllen = 0;
            // SAFETY: our copy of the message, valid for the call.
            unsafe {
                sys::call(
                    libc::SYS_sendmsg,
                    &[fd as usize, (&raw const m) as usize, nowait as usize],
                )
            }
        },
    );
    c.finish(step, || call(flags))
}
