//! The kernel's events, read straight: `epoll_wait` (`epoll_pwait2` for a
//! wait with a timeout) as a system call into a buffer of the reactor's
//! own, and what an event's bits mean for a source.
//!
//! mio registers the fds (its `Registry`), but the wait after every turn
//! that finds nothing to run is the one call of the reactor on the path of
//! every round trip of a connection, and mio's `Poll::poll` goes through
//! libc's `epoll_wait`. That is a cancellation point: in a process of
//! several threads (a runtime's watchdog is one) libc turns asynchronous
//! cancellation on and off around it, two calls more per wait that fibra
//! never needs (as for `recv` and `send`, see `arch::syscall`). Then each
//! of mio's event tests (`is_readable`, `is_read_closed`...) looks at the
//! bits again; [`readiness`] reads them once.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::Interest;
use crate::arch::syscall;

/// How many events one wait takes at most.
const CAPACITY: usize = 1024;

/// Whether `epoll_pwait2` may be tried (until a kernel says it has none).
static PWAIT2: AtomicBool = AtomicBool::new(true);

/// The events of the last wait.
pub(super) struct Events {
    buf: Vec<libc::epoll_event>,
    len: usize,
}

impl Events {
    pub(super) fn new() -> Events {
        Events {
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; CAPACITY],
            len: 0,
        }
    }

    /// Waits on epoll fd `epfd` for at most `timeout` (`None`: until an
    /// event comes). An interrupted wait finds no events.
    ///
    /// A timeout that is neither zero nor `None` is kept to the
    /// nanosecond with `epoll_pwait2` (Linux 5.11): `epoll_wait` takes
    /// milliseconds, and a wait rounded up to the next one ends up to a
    /// millisecond late (an outer loop that waits for its frame's deadline
    /// in `turn` starts the frame that late). Where the kernel lacks it
    /// (`ENOSYS`, or `EPERM` from a seccomp filter that does not know it),
    /// the wait falls back to `epoll_wait`, rounded up as mio's
    /// `Poll::poll` does, and so do all later ones. Zero and `None`, the
    /// waits of every round trip, stay `epoll_wait`.
    #[inline(always)]
    pub(super) fn wait(&mut self, epfd: RawFd, timeout: Option<Duration>) -> io::Result<()> {
        self.len = 0;
        let r = match timeout {
            Some(t) if !t.is_zero() && PWAIT2.load(Ordering::Relaxed) => {
                match self.wait_precise(epfd, t) {
                    Some(r) => r,
                    None => self.wait_ms(epfd, timeout),
                }
            }
            _ => self.wait_ms(epfd, timeout),
        };
        match syscall::result(r) {
            Ok(n) => {
                self.len = n;
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `epoll_wait`: a timeout below a millisecond is rounded up, not to
    /// zero, unless it is zero.
    #[inline(always)]
    fn wait_ms(&mut self, epfd: RawFd, timeout: Option<Duration>) -> isize {
        let ms = timeout.map_or(-1, |t| {
            i32::try_from(
                t.checked_add(Duration::from_nanos(999_999))
                    .unwrap_or(t)
                    .as_millis(),
            )
            .unwrap_or(i32::MAX)
        });
        // SAFETY: `buf` holds CAPACITY events, all of which epoll_wait may
        // write and no more (it is told the count); `epfd` is the caller's
        // epoll fd; the call touches no other memory of ours.
        unsafe {
            syscall::syscall6(
                libc::SYS_epoll_wait,
                epfd as usize,
                self.buf.as_mut_ptr() as usize,
                CAPACITY,
                ms as isize as usize,
                0,
                0,
            )
        }
    }

    /// `epoll_pwait2` with `timeout` to the nanosecond; `None` (and no
    /// more tries, process-wide) where the kernel has no such call.
    #[cold]
    #[inline(never)]
    fn wait_precise(&mut self, epfd: RawFd, timeout: Duration) -> Option<isize> {
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: as `wait_ms`'s call, and `ts` a valid timespec the call
        // only reads; no signal mask (null), so the size is not read.
        let r = unsafe {
            syscall::syscall6(
                libc::SYS_epoll_pwait2,
                epfd as usize,
                self.buf.as_mut_ptr() as usize,
                CAPACITY,
                &raw const ts as usize,
                0,
                0,
            )
        };
        if r == -(libc::ENOSYS as isize) || r == -(libc::EPERM as isize) {
            PWAIT2.store(false, Ordering::Relaxed);
            return None;
        }
        Some(r)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the last wait filled the buffer: the kernel may have more
    /// events ready than it took.
    pub(super) fn filled(&self) -> bool {
        self.len == CAPACITY
    }

    /// Each event of the last wait: its token and its bits.
    #[inline(always)]
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.buf[..self.len].iter().map(|e| {
            // (A packed struct on x86_64: copied out, never referenced.)
            let e = *e;
            (e.u64 as usize, e.events)
        })
    }
}

/// What an event's bits make ready, and what they report closed, with
/// mio's meaning of its `Event` tests (`is_readable() || is_read_closed()
/// || is_error()` makes a source readable; the same for writing).
#[inline(always)]
pub(super) fn readiness(bits: u32) -> (Interest, Interest) {
    let bits = bits as i32;
    let any = |mask: i32| u8::from(bits & mask != 0);
    let ends = libc::EPOLLHUP | libc::EPOLLERR;
    let readable = any(libc::EPOLLIN | libc::EPOLLPRI | ends);
    let writable = any(libc::EPOLLOUT | ends);
    // `is_read_closed`: a hang-up or an error, or input with the peer's
    // half-close; `is_write_closed`: a hang-up or an error.
    let half_closed = u8::from(bits & libc::EPOLLIN != 0 && bits & libc::EPOLLRDHUP != 0);
    let read_closed = any(ends) | half_closed;
    let write_closed = any(ends);
    // Priority data is readable too (as mio says), and PRIORITY for a
    // waiter that asked for it alone (the hooked `poll` of `POLLPRI`).
    let priority = any(libc::EPOLLPRI);
    // (Bits, not branches: this runs for every event.)
    (
        Interest(
            (readable * Interest::READABLE.0)
                | (writable * Interest::WRITABLE.0)
                | (priority * Interest::PRIORITY.0),
        ),
        Interest((read_closed * Interest::READABLE.0) | (write_closed * Interest::WRITABLE.0)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use libc::{EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT, EPOLLPRI, EPOLLRDHUP};

    fn bits(b: i32) -> (Interest, Interest) {
        readiness(b as u32)
    }

    const R: Interest = Interest::READABLE;
    const W: Interest = Interest::WRITABLE;
    const P: Interest = Interest::PRIORITY;
    const NONE: Interest = Interest::EMPTY;

    #[test]
    fn an_event_s_bits_read_as_mio_reads_them() {
        assert_eq!(bits(EPOLLIN), (R, NONE));
        assert_eq!(bits(EPOLLPRI), (R | P, NONE));
        assert_eq!(bits(EPOLLOUT), (W, NONE));
        assert_eq!(bits(EPOLLIN | EPOLLOUT), (R | W, NONE));
        // The peer's half-close: readable, and reads end (a short read
        // then does not mean the next would block).
        assert_eq!(bits(EPOLLIN | EPOLLRDHUP), (R, R));
        // A half-close reported alone is not `is_read_closed` in mio.
        assert_eq!(bits(EPOLLRDHUP), (NONE, NONE));
        assert_eq!(bits(EPOLLHUP), (R | W, R | W));
        assert_eq!(bits(EPOLLERR), (R | W, R | W));
        assert_eq!(bits(EPOLLOUT | EPOLLERR), (R | W, R | W));
    }

    #[test]
    fn a_wait_returns_the_events_of_the_fds_that_are_ready() {
        // SAFETY: epoll_create1 and eventfd return new fds (checked), which
        // this test closes; epoll_ctl reads the event it is given; write
        // reads 8 bytes of `one`.
        unsafe {
            let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            let efd = libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC);
            assert!(ep >= 0 && efd >= 0);
            let mut ev = libc::epoll_event {
                events: (EPOLLIN | libc::EPOLLET) as u32,
                u64: 42,
            };
            assert_eq!(libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, efd, &mut ev), 0);
            let mut events = Events::new();
            events.wait(ep, Some(Duration::ZERO)).unwrap();
            assert!(events.is_empty(), "nothing written yet");
            // A sub-millisecond timeout waits (rounded up), then finds nothing.
            events.wait(ep, Some(Duration::from_micros(10))).unwrap();
            assert!(events.is_empty());
            let one = 1u64;
            assert_eq!(libc::write(efd, (&raw const one).cast(), 8), 8);
            events.wait(ep, None).unwrap();
            let got: Vec<_> = events.iter().collect();
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].0, 42);
            assert_eq!(readiness(got[0].1).0, R);
            // A bad epoll fd is an error, not a panic.
            assert!(events.wait(efd, Some(Duration::ZERO)).is_err());
            libc::close(efd);
            libc::close(ep);
        }
    }

    #[test]
    fn a_timed_wait_keeps_its_nanoseconds_and_falls_back_to_milliseconds() {
        // SAFETY: as in the test above.
        unsafe {
            let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            let efd = libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC);
            assert!(ep >= 0 && efd >= 0);
            let mut ev = libc::epoll_event {
                events: EPOLLIN as u32,
                u64: 7,
            };
            assert_eq!(libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, efd, &mut ev), 0);
            let mut events = Events::new();
            let mut wait = |timeout: Duration| {
                let start = std::time::Instant::now();
                events.wait(ep, Some(timeout)).unwrap();
                (
                    start.elapsed(),
                    events.iter().map(|e| e.0).collect::<Vec<_>>(),
                )
            };
            // The kernel's way (`epoll_pwait2` where it has it) and the
            // fallback (`epoll_wait`): each waits out a sub-millisecond
            // timeout, not less, and returns at once with a ready fd.
            for precise in [true, false] {
                PWAIT2.store(precise, Ordering::Relaxed);
                let (took, got) = wait(Duration::from_micros(300));
                assert!(got.is_empty(), "{got:?}");
                assert!(took >= Duration::from_micros(300), "{took:?}");
                let one = 1u64;
                assert_eq!(libc::write(efd, (&raw const one).cast(), 8), 8);
                let (took, got) = wait(Duration::from_secs(10));
                assert_eq!(got, [7]);
                assert!(took < Duration::from_secs(5), "{took:?}");
                let mut drained = 0u64;
                assert_eq!(libc::read(efd, (&raw mut drained).cast(), 8), 8);
            }
            PWAIT2.store(true, Ordering::Relaxed);
            libc::close(efd);
            libc::close(ep);
        }
    }
}
