//! Readiness for the layers above the scheduler (`io`, `net`, `hook`,
//! `time`): the current fiber's waiter on an fd, a socket's registration
//! and what its short reads and writes showed, an async task's waker and
//! sleep. The reactor is the runtime's (it lives in `Local`), and these
//! functions are the only door to it from above: `io::wait`'s loop, a
//! socket's "try, park on `WouldBlock`, try again" and a hooked call's wait
//! are written with them and [`park`](crate::scheduler::park::park), and take
//! no borrow of the runtime's state themselves.
//!
//! ## Ground rules
//!
//! Every borrow of `Local` here keeps the scheduler's (see
//! `scheduler::core`):
//!
//! - It is taken on the runtime's thread: a `&Core` is only ever had from
//!   `scheduler::context` (`current`, `expect`) or the runtime's own code,
//!   which give the runtime entered on the calling thread, and a `Core` is
//!   not `Sync` (its `Local` is in an `UnsafeCell`).
//! - It ends before anything that may run user code: waking a park (which
//!   may emit a tracing event: a subscriber's code, which may re-enter the
//!   runtime), and cloning or dropping a task's `Waker`. A token to wake is
//!   collected in the borrow and woken after it; a waker is cloned before
//!   the borrow and moved, never cloned or dropped, inside it (a waker it
//!   replaces goes to the reactor's list of unneeded ones, dropped after
//!   the next poll). The reactor itself makes only syscalls.
//! - It never nests: the current fiber's token (whose read borrows too) is
//!   read before the borrow that uses it.
//!
//! The functions are small and inlined: a socket read that finds
//! `WouldBlock` and parks, and the wake-up, cost what they did when each
//! caller borrowed the reactor itself.

use std::io;
use std::os::fd::RawFd;
#[cfg(feature = "futures-io")]
use std::task::Waker;

use crate::reactor::token::WakeToken;
use crate::reactor::{Interest, Reactor, Registration};
use crate::scheduler::core::Core;
use crate::scheduler::core::record::Wake;
#[cfg(feature = "futures-io")]
use crate::timer::wheel::TimerKey;

/// The current fiber's wait for an fd's readiness, in its runtime's
/// reactor: registered for the fiber's next park, and removed when this is
/// dropped, however the wait ends (an unwind included).
pub(crate) struct FdWaiter<'a> {
    core: &'a Core,
    reg: Registration,
}

// Two words, and so is the result that makes one (an `io::Error` fits
// beside the core's non-null pointer): returned in registers.
const _: () = assert!(size_of::<FdWaiter<'static>>() == 16);
const _: () = assert!(size_of::<io::Result<FdWaiter<'static>>>() == 16);

impl<'a> FdWaiter<'a> {
    /// A one-shot waiter on `fd` (not owned: the caller keeps it open
    /// meanwhile) for `interest`, for the current context's next park: what
    /// `io::wait` and a hooked `poll` wait with. `Ok(None)` for an fd epoll
    /// cannot watch because it is always ready (a regular file).
    #[inline]
    pub(crate) fn fd(
        core: &'a Core,
        fd: RawFd,
        interest: Interest,
    ) -> io::Result<Option<FdWaiter<'a>>> {
        let token = core.current_token();
        // SAFETY: `core` is this thread's entered runtime (ground rules);
        // the borrow ends in this statement, is the only one live (token read
        // before it), runs no user code (the reactor only makes syscalls).
        let reg = unsafe { core.local() }
            .reactor
            .add_waiter(fd, interest, token)?;
        Ok(reg.map(|reg| FdWaiter { core, reg }))
    }

    /// A waiter on socket `uid`'s fd for `interest` (one direction), for
    /// the current context's next park, through the socket's registration,
    /// which is made on first use and kept until the socket deregisters
    /// (see [`deregister_socket`]). A registration a closed socket left on
    /// the same fd number is taken over, and its waiters are woken, even
    /// when registering fails.
    ///
    /// Always inlined: every socket wait starts here, and left to itself
    /// the compiler put it out of line once `io_from` grew by a branch
    /// (`instructions.sh ... fibra 1`: 1 006 → 1 033 instructions a trip).
    #[inline(always)]
    pub(crate) fn socket(
        core: &'a Core,
        fd: RawFd,
        uid: u64,
        interest: Interest,
    ) -> io::Result<FdWaiter<'a>> {
        // (Read before the reactor is borrowed.)
        let token = core.current_token();
        let reg = on_socket(core, fd, uid, |reactor, key| {
            reactor.add_socket_waiter(key, interest, token)
        })?;
        Ok(FdWaiter { core, reg })
    }

    /// The readiness this waiter has seen (for a one-shot waiter: the
    /// subset of its interest that an event reported).
    #[inline]
    pub(crate) fn ready(&self) -> Interest {
        // SAFETY: on the runtime's thread (see the ground rules); a short
        // borrow, the only one live, running no user code.
        let l = unsafe { self.core.local() };
        l.reactor.ready(self.reg, l.current)
    }

    /// Moves the waiter to the current context's next park: for a fiber
    /// woken without readiness, which parks again. (A token taken and not
    /// parked on is harmless: it is for the next park.)
    #[inline]
    pub(crate) fn rearm(&self) {
        let token = self.core.current_token();
        // SAFETY: on the runtime's thread (see the ground rules); a short
        // borrow, the only one live (the token was read before it), running
        // no user code.
        unsafe { self.core.local() }
            .reactor
            .retoken(self.reg, token);
    }
}

impl Drop for FdWaiter<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: on the runtime's thread (see the ground rules); a short
        // borrow, the only one live, running no user code (removing the
        // last waiter of a one-shot fd deregisters it: a syscall).
        let l = unsafe { self.core.local() };
        // (The waiter is the current context's: this guard lives in the
        // frame of the park it registered for, see `reactor::Registration`.)
        l.reactor.remove_waiter(self.reg, l.current);
    }
}

/// Whether a short read or write of socket `uid` showed `fd` not ready for
/// `interest`, with no event since (see the reactor's `mark_drained`): the
/// next call should wait first.
#[inline]
pub(crate) fn is_drained(core: &Core, fd: RawFd, uid: u64, interest: Interest) -> bool {
    // SAFETY: on the runtime's thread (see the ground rules); a short
    // borrow, the only one live, running no user code.
    unsafe { core.local() }
        .reactor
        .is_drained(fd, uid, interest)
}

/// Notes that a short read or write of socket `uid` showed `fd` not ready
/// for `interest`.
#[inline]
pub(crate) fn mark_drained(core: &Core, fd: RawFd, uid: u64, interest: Interest) {
    // SAFETY: on the runtime's thread (see the ground rules); a short
    // borrow, the only one live, running no user code.
    unsafe { core.local() }
        .reactor
        .mark_drained(fd, uid, interest);
}

/// Notes that a call on socket `uid` said `WouldBlock` for `interest`:
/// registers the socket in `core`'s reactor if it is not yet (as a wait
/// would), and marks it drained, so that the next wait for `interest`
/// waits for an event.
pub(crate) fn mark_would_block(
    core: &Core,
    fd: RawFd,
    uid: u64,
    interest: Interest,
) -> io::Result<()> {
    on_socket(core, fd, uid, |reactor, _| {
        reactor.mark_drained(fd, uid, interest)
    })
}

/// Runs `f` on the source of socket `uid` on `fd` in `core`'s reactor,
/// registering the fd there first if it is not yet (see
/// [`on_new_socket`]). `f` runs under the borrow of the runtime's state:
/// it must only call the reactor (this module's callers pass a waiter to
/// add or a flag to set).
///
/// Inlined, and only a lookup: a registered socket's wait, at every round
/// trip of a connection, runs no more than that before `f`.
#[inline(always)]
fn on_socket<R>(
    core: &Core,
    fd: RawFd,
    uid: u64,
    f: impl FnOnce(&mut Reactor, usize) -> R,
) -> io::Result<R> {
    {
        // On the runtime's thread (ground rules); the borrow ends with this
        // block and is the only one live (callers read what they need of
        // the state, a token, before); `f` calls the reactor only.
        // SAFETY: as argued just above.
        let reactor = &mut unsafe { core.local() }.reactor;
        if let Some(key) = reactor.owned(fd, uid) {
            return Ok(f(reactor, key));
        }
    }
    on_new_socket(core, fd, uid, f)
}

/// [`on_socket`] for a socket not registered in `core`'s reactor yet:
/// registers it (see `Reactor::socket`); the waiters of a closed socket's
/// source that it takes over are woken after, even when registering fails.
#[cold]
#[inline(never)]
fn on_new_socket<R>(
    core: &Core,
    fd: RawFd,
    uid: u64,
    f: impl FnOnce(&mut Reactor, usize) -> R,
) -> io::Result<R> {
    let mut stale = Vec::new();
    let result = {
        // On the runtime's thread (ground rules); the borrow ends with this
        // block and is the only one live (callers read what they need of
        // the state, a token, before); nothing in it runs user code:
        // `socket` makes syscalls, `f` calls the reactor only (as
        // documented at `on_socket`), and the stale tokens are woken after
        // it.
        // SAFETY: as argued just above.
        let reactor = &mut unsafe { core.local() }.reactor;
        reactor
            .socket(fd, uid, &mut stale)
            .map(|key| f(reactor, key))
    };
    wake_all(core, stale);
    result
}

/// Forgets socket `uid`'s registration of `fd` in `core`'s reactor, before
/// the fd is closed; its waiters (other fibers blocked on the fd) are woken
/// and find it closed. Its task wakers go to the reactor's unneeded ones.
pub(crate) fn deregister_socket(core: &Core, fd: RawFd, uid: u64) {
    let mut waiters = Vec::new();
    // SAFETY: on the runtime's thread (ground rules); the borrow ends in
    // this statement, is the only one live, runs no user code (tokens are
    // woken after it, task wakers dropped after the next poll).
    unsafe { core.local() }
        .reactor
        .deregister_socket(fd, uid, &mut waiters);
    wake_all(core, waiters);
}

/// Makes `waker` the task waker of socket `uid` on `fd` for `interest` (one
/// direction) in `core`'s reactor, registering the fd there if it is not
/// yet: what a socket's poll does on a thread with a runtime, and what the
/// fallback reactor's thread does for the others.
///
/// The waker is user code: it is compared (pointers only) inside a borrow,
/// but cloned, and any clone dropped, outside; the reactor drops the waker
/// it replaces after its next poll.
#[cfg(feature = "futures-io")]
pub(crate) fn register_task(
    core: &Core,
    fd: RawFd,
    uid: u64,
    interest: Interest,
    waker: &Waker,
) -> io::Result<()> {
    // SAFETY: on the runtime's thread (see the ground rules); a short
    // borrow, the only one live; `will_wake` compares pointers and runs no
    // user code.
    if unsafe { core.local() }
        .reactor
        .task_will_wake(fd, uid, interest, waker)
    {
        return Ok(());
    }
    // User code (a waker's clone), with no borrow live.
    let mut waker = Some(waker.clone());
    let mut stale = Vec::new();
    let registered = {
        // SAFETY: on the runtime's thread (see the ground rules); the
        // borrow ends with this block, is the only one live and runs no
        // user code: the waker is moved, not dropped, in here.
        let reactor = &mut unsafe { core.local() }.reactor;
        reactor.socket(fd, uid, &mut stale).map(|key| {
            if let Some(waker) = waker.take() {
                reactor.set_task(key, interest, waker);
            }
        })
    };
    drop(waker); // on error, the clone: user code, no borrow live
    wake_all(core, stale);
    registered
}

/// Re-arms socket `uid`'s registration of `fd` in `core`'s reactor, so
/// that readiness of the moment is reported at its next poll: for a waker
/// registered from another thread (`runtime::fallback`), whose edge the
/// reactor's poll may have consumed between the task's `WouldBlock` and the
/// registration.
#[cfg(feature = "futures-io")]
pub(crate) fn rearm_socket(core: &Core, fd: RawFd, uid: u64) -> io::Result<()> {
    // SAFETY: on the runtime's thread (see the ground rules); a short
    // borrow, the only one live, running no user code (a syscall).
    unsafe { core.local() }.reactor.rearm_socket(fd, uid)
}

/// Arms a sleep of an async task in `core`'s reactor: `waker` is woken once
/// `deadline` (CLOCK_MONOTONIC ns) has passed. The waker comes back if the
/// reactor has no timer for tasks and cannot make one (out of fds).
#[cfg(feature = "futures-io")]
pub(crate) fn add_task_timer(core: &Core, deadline: u64, waker: Waker) -> Result<TimerKey, Waker> {
    // SAFETY: on the runtime's thread (ground rules); the borrow ends in
    // this body, is the only one live, runs no user code: the waker is
    // moved (into the reactor or back out), never cloned or dropped here.
    let reactor = &mut unsafe { core.local() }.reactor;
    match reactor.task_timers_ready() {
        Ok(()) => Ok(reactor.add_task_timer(deadline, waker)),
        Err(_) => Err(waker),
    }
}

/// Disarms a task's sleep armed in `core`'s reactor (a stale key, of one
/// that fired, is ignored); its waker is dropped after the next poll.
#[cfg(feature = "futures-io")]
pub(crate) fn cancel_task_timer(core: &Core, key: TimerKey) {
    // SAFETY: on the runtime's thread (see the ground rules); a short
    // borrow, the only one live, running no user code (the timer's waker
    // goes to the reactor's unneeded list).
    unsafe { core.local() }.reactor.cancel_task_timer(key);
}

/// Wakes the parks of `tokens`, with no borrow live: a wake may run a
/// tracing subscriber. The check for none is inlined; the loop is not (it
/// is rare on the paths that call this: every socket wait is one).
#[inline]
fn wake_all(core: &Core, tokens: Vec<WakeToken>) {
    if !tokens.is_empty() {
        wake_each(core, tokens);
    }
}

#[inline(never)]
fn wake_each(core: &Core, tokens: Vec<WakeToken>) {
    for t in tokens {
        core.wake(t, Wake::Unparked);
    }
}
