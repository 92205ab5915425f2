//! One hooked call on a blocking fd ([`Call`]): make it non-blocking for
//! this call only, and on `EAGAIN` park the fiber until the fd is ready, at
//! most a socket's own timeout.

use libc::{c_int, c_long, iovec};

use super::fds::{self, Fd};
use super::sys::{self, EAGAIN};
use super::wait::{self, Waited};
use crate::io::Interest;
use crate::scheduler::core::Core;
use crate::scheduler::interrupt::{self, Epoch, Interrupted};
use crate::timer::clock;

/// `RWF_NOWAIT`: this `preadv2`/`pwritev2` must not block (Linux ≥ 4.14;
/// for sockets the kernel turns it into `MSG_DONTWAIT`).
const RWF_NOWAIT: usize = 0x8;
const EOPNOTSUPP: isize = -(libc::EOPNOTSUPP as isize);

/// What a hooked call ended with.
pub(super) enum Step {
    /// The kernel's answer (`-errno` on failure).
    Done(isize),
    /// The fd cannot be parked on after all: make the real call.
    Real,
}

/// One hooked call on a blocking fd, across its waits.
pub(super) struct Call<'a> {
    core: &'a Core,
    fd: c_int,
    what: Fd,
    interest: Interest,
    /// Looked up the first time the call would block: `Some(deadline)`.
    deadline: Option<Option<u64>>,
    /// The thread's count of signal handlers when the call first would
    /// have blocked (see `scheduler::interrupt`).
    since: Option<Epoch>,
}

impl<'a> Call<'a> {
    /// A call that does not block touches nothing of the scheduler: a
    /// signal handler may make it (the self-pipe trick), interrupting the
    /// scheduler in the middle of its own work. So, unlike `fibra::net`'s
    /// sockets, hooked calls spend no I/O budget and never yield; only a
    /// call that would block, on a blocking socket, parks — and never in
    /// a signal handler (see `handlers`).
    pub(super) fn new(core: &'a Core, fd: c_int, what: Fd, interest: Interest) -> Call<'a> {
        Call {
            core,
            fd,
            what,
            interest,
            deadline: None,
            since: None,
        }
    }

    /// Makes `attempt` (the call in its non-blocking form) until it does
    /// not say `EAGAIN`, parking in between.
    ///
    /// Always inlined into each hook, as the loop was before it had its
    /// `RWF_NOWAIT` memo: out of line it cost a hooked echo client 60
    /// instructions a trip (callgrind).
    #[inline(always)]
    pub(super) fn run(&mut self, mut attempt: impl FnMut() -> isize) -> Step {
        if !self.what.nowait() {
            return Step::Done(EOPNOTSUPP); // known: see `fds::mark_no_nowait`
        }
        loop {
            let r = attempt();
            if r == EOPNOTSUPP && !self.what.is_socket() {
                // (A socket's EOPNOTSUPP is an answer: MSG_OOB on UDP.)
                fds::mark_no_nowait(self.fd, self.what);
            }
            if r != EAGAIN {
                return Step::Done(r);
            }
            if let Err(step) = self.wait() {
                return step;
            }
        }
    }

    /// Parks until the fd may be ready (its next event), at most until a
    /// socket's timeout: `Err` with what the call is to return when it may
    /// not wait (see [`Call::would_block`]) or the wait failed.
    ///
    /// A signal handler that ran on the thread meanwhile ends the call as
    /// it would end the kernel's (signal(7)): with `EINTR` if it was
    /// installed without `SA_RESTART`, or the socket has a timeout; else
    /// the call goes on waiting. (A call that moved some bytes already
    /// returns them instead: see [`Call::run_all`].)
    ///
    /// Always inlined: a call that waits then parks one frame from the
    /// hook, as before this was a function (at 1 000 connections each
    /// frame's stack lines come back cold after the wait).
    #[inline(always)]
    pub(super) fn wait(&mut self) -> Result<(), Step> {
        let deadline = match self.deadline {
            Some(deadline) => deadline,
            None => *self.deadline.insert(self.would_block()?),
        };
        let since = *self.since.get_or_insert_with(interrupt::epoch);
        let (fd, uid) = (self.fd, self.what.uid());
        match wait::socket(self.core, fd, uid, self.interest, deadline, since) {
            Waited::Woken => Ok(()),
            Waited::Unwatchable => Err(Step::Real),
            Waited::Interrupted(Interrupted::Restartable) if deadline.is_none() => {
                self.since = Some(interrupt::epoch()); // restarted
                Ok(())
            }
            w => Err(Step::Done(-(w.errno(libc::EAGAIN) as isize))),
        }
    }

    /// The call would block: `Err` if its caller wants no waiting (an
    /// `O_NONBLOCK` fd: `EAGAIN`) or it is no socket after all (the number
    /// was reused behind our back); else the deadline of a socket's
    /// timeout (other fds have none).
    pub(super) fn would_block(&self) -> Result<Option<u64>, Step> {
        let flags = sys::get_fl(self.fd);
        if flags < 0 {
            return Err(Step::Done(flags));
        }
        if flags & libc::O_NONBLOCK as isize != 0 {
            return Err(Step::Done(EAGAIN));
        }
        if !self.what.is_socket() {
            return Ok(None);
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
                fds::mark_ignored(self.fd);
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
    #[inline(always)]
    pub(super) fn run_all(
        &mut self,
        len: usize,
        mut attempt: impl FnMut(usize) -> isize,
    ) -> Option<isize> {
        let mut done = 0usize;
        loop {
            match self.run(|| attempt(done)) {
                Step::Real if done == 0 => return None,
                Step::Done(EOPNOTSUPP) if done == 0 && !self.what.is_socket() => return None,
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

/// The fiber's runtime and what `fd` is, if a call on it may park.
#[inline(always)]
pub(super) fn hooked<'a>(fd: c_int) -> Option<(&'a Core, Fd)> {
    let core = super::parkable_fd(fd)?;
    Some((core, fds::lookup(fd)?))
}

/// [`hooked`], for the calls only a socket takes.
#[inline(always)]
pub(super) fn hooked_socket<'a>(fd: c_int) -> Option<(&'a Core, Fd)> {
    hooked(fd).filter(|(_, what)| what.is_socket())
}

/// `preadv2`/`pwritev2` (`n`) at the current position with `RWF_NOWAIT`.
///
/// # Safety
///
/// `iov` points to `cnt` iovecs valid for the transfer.
pub(super) unsafe fn rw_nowait(n: c_long, fd: c_int, iov: *const iovec, cnt: c_int) -> isize {
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

impl Call<'_> {
    /// Parks until the fd is ready for the call's interest as `poll` sees
    /// it (or has an error or a hang-up to report): then the blocking call
    /// will not wait, unless another thread takes what was ready first.
    /// `Err`: what the call is to return instead (see [`Call::wait`]).
    pub(super) fn wait_ready(&mut self) -> Result<(), isize> {
        let mut events = 0;
        if self.interest.is_readable() {
            events |= libc::POLLIN;
        }
        if self.interest.is_writable() {
            events |= libc::POLLOUT;
        }
        loop {
            let mut pfd = libc::pollfd {
                fd: self.fd,
                events,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            if unsafe { sys::poll_now(&mut pfd, 1) } != 0 {
                return Ok(());
            }
            match self.wait() {
                Ok(()) => {}
                Err(Step::Real) => return Ok(()), // let the kernel wait
                Err(Step::Done(r)) => return Err(r),
            }
        }
    }

    /// A step's result; or the real call's, when the fd cannot be parked
    /// on or the kernel has no non-blocking form of the call for it
    /// (`EOPNOTSUPP`: a tty, a timerfd): then after [`Call::wait_ready`].
    #[inline(always)]
    pub(super) fn finish(mut self, step: Step, real: impl FnOnce() -> isize) -> isize {
        match step {
            Step::Done(EOPNOTSUPP) if !self.what.is_socket() => self.fallback(real),
            Step::Real => self.fallback(real),
            // (A socket's EOPNOTSUPP is the call's answer.)
            Step::Done(r) => sys::ret(r),
        }
    }

    /// The real call, once the fd is ready (see [`Call::finish`]).
    pub(super) fn fallback(&mut self, real: impl FnOnce() -> isize) -> isize {
        match self.wait_ready() {
            Ok(()) => sys::ret(real()),
            Err(r) => sys::ret(r),
        }
    }
}
