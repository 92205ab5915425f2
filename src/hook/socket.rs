//! Socket calls: read, write and their vectored, `recv*` and `send*`
//! forms, accept and connect.
//!
//! Each hook makes its call non-blocking for this call only, and on
//! `EAGAIN` parks the fiber if the socket is a blocking one ([`Call`]).
//! Anything else — not in a fiber, stdio, not a socket, a non-blocking
//! call — goes to the kernel unchanged.

use libc::{c_int, c_long, c_void, iovec, msghdr, size_t, sockaddr, socklen_t, ssize_t};

use super::fds;
use super::sys::{self, EAGAIN};
use super::wait::{self, Waited};
use crate::io::Interest;
use crate::runtime::core::Core;
use crate::time::clock;

/// `RWF_NOWAIT`: this `preadv2`/`pwritev2` must not block (Linux ≥ 4.14;
/// for sockets the kernel turns it into `MSG_DONTWAIT`).
const RWF_NOWAIT: usize = 0x8;
const EOPNOTSUPP: isize = -(libc::EOPNOTSUPP as isize);

/// What a hooked call ended with.
enum Step {
    /// The kernel's answer (`-errno` on failure).
    Done(isize),
    /// The fd cannot be parked on after all: make the real call.
    Real,
}

/// One hooked call on a blocking socket, across its waits.
struct Call<'a> {
    core: &'a Core,
    fd: c_int,
    uid: u64,
    interest: Interest,
    /// Looked up the first time the call would block: `Some(deadline)`.
    deadline: Option<Option<u64>>,
}

impl<'a> Call<'a> {
    fn new(core: &'a Core, fd: c_int, uid: u64, interest: Interest) -> Call<'a> {
        if core.io_budget_spent() {
            // Many socket calls without a park: let the others run (as
            // fibra's own sockets do), so a socket whose data is always
            // there cannot starve the thread.
            core.yield_now();
        }
        Call {
            core,
            fd,
            uid,
            interest,
            deadline: None,
        }
    }

    /// Makes `attempt` (the call in its non-blocking form) until it does
    /// not say `EAGAIN`, parking in between.
    fn run(&mut self, mut attempt: impl FnMut() -> isize) -> Step {
        loop {
            let r = attempt();
            if r != EAGAIN {
                return Step::Done(r);
            }
            let deadline = match self.deadline {
                Some(deadline) => deadline,
                None => match self.would_block() {
                    Ok(deadline) => *self.deadline.insert(deadline),
                    Err(step) => return step,
                },
            };
            match wait::socket(self.core, self.fd, self.uid, self.interest, deadline) {
                Waited::Woken => {}
                Waited::Unwatchable => return Step::Real,
                w => return Step::Done(-(w.errno(libc::EAGAIN) as isize)),
            }
        }
    }

    /// The call would block: `Err` if its caller wants no waiting (an
    /// `O_NONBLOCK` socket: `EAGAIN`) or it is no socket after all (the
    /// number was reused behind our back); else the socket timeout's
    /// deadline.
    fn would_block(&self) -> Result<Option<u64>, Step> {
        let flags = sys::get_fl(self.fd);
        if flags < 0 {
            return Err(Step::Done(flags));
        }
        if flags & libc::O_NONBLOCK as isize != 0 {
            return Err(Step::Done(EAGAIN));
        }
        let opt = if self.interest.is_readable() {
            libc::SO_RCVTIMEO
        } else {
            libc::SO_SNDTIMEO
        };
        let zero = libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        match sys::sockopt(self.fd, opt, zero) {
            Ok(tv) if tv.tv_sec == 0 && tv.tv_usec == 0 => Ok(None),
            Ok(tv) => {
                let ns = (tv.tv_sec as u64)
                    .saturating_mul(1_000_000_000)
                    .saturating_add(tv.tv_usec as u64 * 1000);
                Ok(Some(clock::now_ns().saturating_add(ns)))
            }
            Err(e) if e == -(libc::ENOTSOCK as isize) => {
                fds::mark_not_socket(self.fd);
                Err(Step::Real)
            }
            Err(e) => Err(Step::Done(e)),
        }
    }

    /// [`Call::run`] for a call that must move `len` bytes before it
    /// returns (a blocking stream send; `recv` with `MSG_WAITALL`):
    /// `attempt(done)` moves the rest after `done` bytes. Returns `None`
    /// for the real call (when nothing moved yet). Stops early at an error
    /// or end of stream, returning what moved, as the kernel does.
    fn run_all(&mut self, len: usize, mut attempt: impl FnMut(usize) -> isize) -> Option<isize> {
        let mut done = 0usize;
        loop {
            match self.run(|| attempt(done)) {
                Step::Real if done == 0 => return None,
                Step::Done(EOPNOTSUPP) if done == 0 => return None,
                Step::Real => return Some(done as isize),
                Step::Done(r) if r < 0 => return Some(if done > 0 { done as isize } else { r }),
                Step::Done(r) => {
                    done += r as usize;
                    if done >= len || r == 0 {
                        return Some(done as isize);
                    }
                }
            }
        }
    }
}

/// The fiber's runtime and the fd's hook uid, if a call on `fd` may park.
#[inline(always)]
fn hooked<'a>(fd: c_int) -> Option<(&'a Core, u64)> {
    let core = super::parkable_fd(fd)?;
    Some((core, fds::socket(fd)?))
}

/// `preadv2`/`pwritev2` (`n`) at the current position with `RWF_NOWAIT`.
///
/// # Safety
///
/// `iov` points to `cnt` iovecs valid for the transfer.
unsafe fn rw_nowait(n: c_long, fd: c_int, iov: *const iovec, cnt: c_int) -> isize {
    // SAFETY: the caller's contract; offset -1 (low word all ones, high
    // word 0): the current position, as read(2) and write(2) use.
    unsafe {
        sys::call6(
            n,
            fd as usize,
            iov as usize,
            cnt as usize,
            usize::MAX,
            0,
            RWF_NOWAIT,
        )
    }
}

/// A step's result, or the real call's when it says so.
fn finish(step: Step, real: impl FnOnce() -> isize) -> isize {
    match step {
        Step::Done(EOPNOTSUPP) | Step::Real => sys::ret(real()),
        Step::Done(r) => sys::ret(r),
    }
}

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
    let Some((core, uid)) = hooked(fd) else {
        return sys::ret(real());
    };
    let iov = iovec {
        iov_base: buf,
        iov_len: count,
    };
    let step = Call::new(core, fd, uid, Interest::READABLE).run(|| {
        // SAFETY: one iovec of the caller's buffer.
        unsafe { rw_nowait(libc::SYS_preadv2, fd, &iov, 1) }
    });
    finish(step, real)
}

/// write(2): on a blocking socket, returns when all is written.
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
    let Some((core, uid)) = hooked(fd) else {
        return sys::ret(real());
    };
    let moved = Call::new(core, fd, uid, Interest::WRITABLE).run_all(count, |done| {
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
        None => sys::ret(real()),
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
    let Some((core, uid)) = hooked(fd) else {
        return sys::ret(real());
    };
    let step = Call::new(core, fd, uid, Interest::READABLE).run(|| {
        // SAFETY: the caller's iovecs, as readv(2) would use them.
        unsafe { rw_nowait(libc::SYS_preadv2, fd, iov, cnt) }
    });
    finish(step, real)
}

/// writev(2). On a blocking socket it may return having written a part,
/// as a non-blocking one does (std's `write_all_vectored` goes on).
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
    let Some((core, uid)) = hooked(fd) else {
        return sys::ret(real());
    };
    let step = Call::new(core, fd, uid, Interest::WRITABLE).run(|| {
        // SAFETY: the caller's iovecs, as writev(2) would use them.
        unsafe { rw_nowait(libc::SYS_pwritev2, fd, iov, cnt) }
    });
    finish(step, real)
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
    if flags & libc::MSG_DONTWAIT != 0 {
        return sys::ret(real());
    }
    let Some((core, uid)) = hooked(fd) else {
        return sys::ret(real());
    };
    let nowait = flags | libc::MSG_DONTWAIT;
    let mut c = Call::new(core, fd, uid, Interest::READABLE);
    if flags & libc::MSG_WAITALL != 0 {
        return match c.run_all(len, |done| {
            call(
                buf.cast::<u8>().wrapping_add(done).cast(),
                len - done,
                nowait,
            )
        }) {
            Some(r) => sys::ret(r),
            None => sys::ret(real()),
        };
    }
    let step = c.run(|| call(buf, len, nowait));
    finish(step, real)
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
    if flags & (libc::MSG_DONTWAIT | libc::MSG_WAITALL) != 0 {
        return sys::ret(call(flags));
    }
    let Some((core, uid)) = hooked(fd) else {
        return sys::ret(call(flags));
    };
    let step =
        Call::new(core, fd, uid, Interest::READABLE).run(|| call(flags | libc::MSG_DONTWAIT));
    finish(step, || call(flags))
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
    let Some((core, uid)) = hooked(fd) else {
        return sys::ret(call(0, flags));
    };
    let nowait = flags | libc::MSG_DONTWAIT;
    match Call::new(core, fd, uid, Interest::WRITABLE).run_all(len, |done| call(done, nowait)) {
        Some(r) => sys::ret(r),
        None => sys::ret(call(0, flags)),
    }
}

/// sendmsg(2). On a blocking socket it may return having sent a part, as a
/// non-blocking one does.
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
    let Some((core, uid)) = hooked(fd) else {
        return sys::ret(call(flags));
    };
    let step =
        Call::new(core, fd, uid, Interest::WRITABLE).run(|| call(flags | libc::MSG_DONTWAIT));
    finish(step, || call(flags))
}

/// accept(2).
///
/// # Safety
///
/// As accept(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { accept4(fd, addr, len, 0) }
}

/// accept4(2). There is no per-call non-blocking flag: the listener is made
/// `O_NONBLOCK` for each try and restored at once.
///
/// # Safety
///
/// As accept4(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    let call = || {
        // SAFETY: the caller's contract, passed to the kernel.
        unsafe {
            sys::call(
                libc::SYS_accept4,
                &[fd as usize, addr as usize, len as usize, flags as usize],
            )
        }
    };
    if let Some((core, uid)) = hooked(fd) {
        let mode = sys::get_fl(fd);
        if mode >= 0 && mode & libc::O_NONBLOCK as isize == 0 {
            let step = Call::new(core, fd, uid, Interest::READABLE).run(|| {
                if sys::set_fl(fd, mode | libc::O_NONBLOCK as isize) < 0 {
                    return call(); // cannot: block the thread
                }
                let r = call();
                sys::set_fl(fd, mode);
                r
            });
            return finish(step, call) as c_int;
        }
    }
    sys::ret(call()) as c_int
}

/// connect(2). There is no per-call non-blocking flag: the socket is made
/// `O_NONBLOCK` for the system call and restored at once; then the fiber
/// waits for the connection, at most the socket's `SO_SNDTIMEO` (then
/// `EINPROGRESS`, as the kernel's blocking connect says).
///
/// # Safety
///
/// As connect(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let call = || {
        // SAFETY: the caller's contract, passed to the kernel.
        unsafe {
            sys::call(
                libc::SYS_connect,
                &[fd as usize, addr as usize, len as usize],
            )
        }
    };
    if let Some((core, uid)) = hooked(fd)
        && let Some(r) = connect_parked(core, fd, uid, call)
    {
        return sys::ret(r) as c_int;
    }
    sys::ret(call()) as c_int
}

/// A connect that parks while the handshake runs; `None`: make the real
/// call instead (a non-blocking socket; a Unix socket whose listener's
/// backlog is full, which has nothing to wait on).
fn connect_parked(core: &Core, fd: c_int, uid: u64, call: impl Fn() -> isize) -> Option<isize> {
    let mode = sys::get_fl(fd);
    if mode < 0 || mode & libc::O_NONBLOCK as isize != 0 {
        return None;
    }
    if sys::set_fl(fd, mode | libc::O_NONBLOCK as isize) < 0 {
        return None;
    }
    let r = call();
    sys::set_fl(fd, mode);
    if r == EAGAIN {
        return None;
    }
    if r != -(libc::EINPROGRESS as isize) {
        return Some(r);
    }
    let c = Call::new(core, fd, uid, Interest::WRITABLE);
    let deadline = match c.would_block() {
        Ok(deadline) => deadline,
        Err(Step::Done(r)) => return Some(r),
        Err(Step::Real) => return Some(-(libc::EINPROGRESS as isize)),
    };
    loop {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { sys::poll_now(&mut pfd, 1) };
        if ready != 0 {
            if ready < 0 {
                return Some(ready);
            }
            return Some(match sys::sockopt(fd, libc::SO_ERROR, 0 as c_int) {
                Ok(0) => 0,
                Ok(e) => -(e as isize),
                Err(e) => e,
            });
        }
        match wait::socket(core, fd, uid, Interest::WRITABLE, deadline) {
            Waited::Woken => {}
            Waited::Unwatchable => {
                // Wait in the kernel, then look as above.
                pfd.revents = 0;
                // SAFETY: one valid pollfd.
                unsafe { sys::call(libc::SYS_poll, &[(&raw mut pfd) as usize, 1, usize::MAX]) };
            }
            w => return Some(-(w.errno(libc::EINPROGRESS) as isize)),
        }
    }
}
