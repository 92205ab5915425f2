//! The reactor: one mio `Poll` per runtime, and who waits on which fd.
//! mio registers the fds; the wait itself is `epoll_wait` made directly
//! (`events.rs`); each watched fd's state is a [`Source`] (`source.rs`).
//!
//! A fiber that awaits an fd registers a *waiter* (its wake token and the
//! readiness it wants) on the fd's *source*, parks, and removes the waiter
//! when it wakes. The first waiter of an fd adds it to the epoll set
//! (edge-triggered); a later waiter re-arms it with `EPOLL_CTL_MOD`, which
//! makes the kernel report the fd's current readiness again, so nobody waits
//! for an edge that has already passed. When the last waiter leaves, the fd
//! leaves the epoll set: [`crate::io::wait`] does not own the fd and cannot
//! know when its owner closes it.
//!
//! Besides the sources, the epoll set holds two fds of the runtime's own:
//!
//! - the `mio::Waker` (an eventfd), written by other threads that queued a
//!   message for this runtime (see `scheduler::shared`);
//! - a timerfd set to the timer wheel's next expiration, so the epoll fd is
//!   readable when a timer is due. That is what lets an outer event loop
//!   nest a runtime by polling its fd alone, and it gives sleeps nanosecond
//!   precision where `epoll_wait`'s timeout has only milliseconds.
//!
//! and, once a hooked `connect` or `accept` has needed it, the fd of an
//! io_uring that makes those calls without blocking a thread
//! (`completions.rs`, `uring.rs`).
//!
//! ## Sockets: registered once, readiness remembered
//!
//! A socket (`crate::net`) is registered the first time one of its calls
//! would block, for reading and writing at once, edge-triggered, and stays
//! registered until it is dropped. A fiber always tries its syscall first
//! and parks only when it said `WouldBlock`; an edge that comes after the
//! syscall and before the park is not lost, since the waiter is in place
//! before the next `epoll_wait`. The reader and the writer wait separately.
//!
//! A source also remembers when a short read or write showed the socket
//! drained ([`Reactor::mark_drained`]): until an event says otherwise, the
//! next call waits for that event instead of trying a syscall that could
//! only say `WouldBlock` (tokio does the same). That saves one syscall per
//! message in a request-response loop.
//!
//! A source records the socket it belongs to (a unique id), and mio tokens
//! carry the source's generation: if a socket's fd is closed without
//! deregistration (dropped on another thread, say) and its number reused, the
//! new socket starts a new generation, and events of the old registration
//! can never wake the new socket's fibers.
//!
//! ## Tasks: wakers instead of fibers
//!
//! An async task that polls a socket (`futures_io::AsyncRead` and friends,
//! feature `futures-io`) is no fiber: it leaves a `Waker` in the socket's
//! source, one slot per direction (the last task to poll a direction is the
//! one woken, as with tokio's sockets). An event for that direction takes
//! the waker out of its slot. A [`Sleep`](crate::time::Sleep) future leaves
//! its waker in a second timer wheel of the reactor's, with a timerfd of
//! its own made on first use.
//!
//! A waker is user code — waking it, cloning it and dropping it may run
//! anything, re-entering fibra included — so the reactor never calls one:
//! the wakers an event fires go out in [`Polled`], whose drop wakes them,
//! and the wakers it stops needing (replaced, of a socket that is gone, of
//! a cancelled sleep) wait in a list of its own and go out, to be dropped,
//! with the next [`Polled`]. The scheduler drops a [`Polled`] after its
//! borrow of the runtime's state has ended (see [`Polled`]).
//!
//! ## Ground rules
//!
//! The reactor belongs to its runtime's thread: only that thread touches it,
//! through the scheduler's local state, never while a fiber is switched in
//! the middle of a reactor call. It never runs user code (a waker): see
//! above.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::task::Waker;
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Poll, Token};

mod completions;
mod events;
mod fd_map;
mod interest;
mod sockets;
mod source;
mod tasks;
mod timerfd;
pub(crate) mod token;
mod uring;
mod waiters;

#[cfg(feature = "hook")]
pub(crate) use completions::OpKey;
use completions::{Completions, RING};
use events::Events;
use fd_map::FdMap;
pub use interest::Interest;
pub(crate) use sockets::new_socket_owner;
use source::Source;
pub(crate) use tasks::TaskWakes;
use timerfd::{new_timerfd, set_timerfd};
use waiters::Waiter;

use crate::mem::MappedSlab;
use crate::reactor::token::{Key, WakeToken};
use crate::timer::clock;
use crate::timer::wheel::{Fired, Wheel};

/// The mio token of the runtime's `Waker`.
pub(crate) const WAKER: Token = Token(usize::MAX);
/// The mio token of the runtime's timerfd.
const TIMER: Token = Token(usize::MAX - 1);
/// The mio token of the timerfd of tasks' sleeps.
const TASK_TIMER: Token = Token(usize::MAX - 2);

/// What a poll found.
///
/// # Invariant
///
/// Dropping it wakes the tasks the poll found ready and drops the wakers
/// the reactor no longer needs: user code. The caller drops it after its
/// borrow of the runtime's state has ended (the scheduler's `poll_events`
/// does: it matches on the result after the block that borrowed).
#[derive(Default)]
pub(crate) struct Polled {
    /// Another thread woke the runtime: drain its remote queue.
    pub(crate) remote: bool,
    /// The kernel reported any event at all (a socket, the waker, a
    /// timerfd): whoever polls may have something new to look at.
    pub(crate) any: bool,
    /// `None` in the usual turn, with no task waker to wake or drop: then
    /// dropping it is one test, inlined. (Boxed: a `Polled` of two words
    /// comes back in registers.)
    pub(crate) tasks: Option<Box<TaskWakes>>,
}

/// Laid out by hand (`repr(C)`): what every poll and socket wait reads
/// first (the epoll fd, the events, the sources and the fd map), the
/// timers and async tasks' parts after. (The declaration order is also the
/// drop order: the wakers the fields hold are user code, but none can
/// reach this reactor as it drops, its runtime being entered by no thread
/// then, so their order among themselves does not matter.)
#[repr(C)]
pub(crate) struct Reactor {
    poll: Poll,
    next_generation: u32,
    events: Events,
    sources: MappedSlab<Source>,
    by_fd: FdMap,
    /// Wakers no longer needed, dropped after the next poll (see the
    /// module docs).
    unneeded: Vec<Waker>,
    /// Task wakers the poll under way found ready (moved to its
    /// [`Polled`]).
    woken_tasks: Vec<Waker>,
    /// The absolute CLOCK_MONOTONIC time the timerfd is set to, if any.
    armed: Option<u64>,
    timerfd: OwnedFd,
    /// Sleeps of async tasks (see the module docs).
    task_timers: Wheel<Waker>,
    /// Their timerfd, made on first use, and the time it is set to.
    task_timerfd: Option<OwnedFd>,
    task_armed: Option<u64>,
    fired_tasks: Vec<Fired<Waker>>,
    /// Connects and accepts the kernel completes (`completions.rs`).
    completions: Completions,
}

/// The mio token of a source: its slot and its generation.
fn mio_token(key: usize, generation: u32) -> Token {
    Token(key | (generation as usize) << 32)
}

/// A waiter's registration: its source's slot, and the source's
/// generation (the slot may be reused once the source is gone), in one word
/// as in the source's mio token.
///
/// The waiter itself is found in the source by its context's key: a
/// context's waiters are guards of its own park (`FdWaiter`), dropped
/// before it parks on anything else, so it has no other waiter there. (A
/// `poll` that lists an fd twice gives the fd two waiters of one context:
/// then any of them stands for each, as they share a park.) In one word,
/// an `FdWaiter` is two, returned in registers and kept in two across the
/// park: with the token in it, it took five, returned through memory and
/// copied into the frame of every socket call that waits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Registration(u64);

impl Registration {
    fn new(source: usize, generation: u32) -> Registration {
        debug_assert!(u32::try_from(source).is_ok(), "a source slot below 2^32");
        Registration(source as u64 | u64::from(generation) << 32)
    }

    fn source(self) -> usize {
        self.0 as u32 as usize
    }

    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

impl Reactor {
    pub(crate) fn new() -> io::Result<Reactor> {
        let poll = Poll::new()?;
        let timerfd = new_timerfd()?;
        poll.registry().register(
            &mut SourceFd(&timerfd.as_raw_fd()),
            TIMER,
            mio::Interest::READABLE,
        )?;
        Ok(Reactor {
            poll,
            events: Events::new(),
            sources: MappedSlab::new(),
            by_fd: FdMap::default(),
            timerfd,
            armed: None,
            next_generation: 0,
            task_timers: Wheel::new(),
            task_timerfd: None,
            task_armed: None,
            unneeded: Vec::new(),
            woken_tasks: Vec::new(),
            fired_tasks: Vec::new(),
            completions: Completions::default(),
        })
    }

    /// The mio registry, to create the runtime's `Waker` on.
    pub(crate) fn registry(&self) -> &mio::Registry {
        self.poll.registry()
    }

    /// The epoll fd.
    pub(crate) fn fd(&self) -> RawFd {
        self.poll.as_raw_fd()
    }

    /// Whether any fd is being waited on (if not, a zero-timeout poll can
    /// only find the waker or the timerfd, which are checked otherwise).
    pub(crate) fn has_waiters(&self) -> bool {
        !self.sources.is_empty()
            || !self.task_timers.is_empty()
            || !self.unneeded.is_empty()
            || self.completions.in_flight()
    }

    /// Whether the last poll took as many events as it could: more may be
    /// ready in the epoll set, with no new edge to tell an outer watcher.
    pub(crate) fn events_left(&self) -> bool {
        self.events.filled()
    }

    /// Registers `token` to be woken when `fd` is ready for `interest`.
    ///
    /// Returns `Ok(None)` for fds epoll cannot watch because they are always
    /// ready (regular files, as `poll(2)` reports them).
    pub(crate) fn add_waiter(
        &mut self,
        fd: RawFd,
        interest: Interest,
        token: WakeToken,
    ) -> io::Result<Option<Registration>> {
        let generation = self.new_generation(); // used if the fd is new here
        let registry = self.poll.registry();
        let source = match self.by_fd.get(fd) {
            Some(key) => {
                let src = &mut self.sources[key];
                src.interest = src.interest | interest;
                let mio_interest = to_mio(src.interest);
                let tok = mio_token(key, src.generation);
                // MOD re-arms the edge: the kernel reports current readiness.
                match registry.reregister(&mut SourceFd(&fd), tok, mio_interest) {
                    Ok(()) => {}
                    // The fd was closed and its number reused since: start over.
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                        registry.register(&mut SourceFd(&fd), tok, mio_interest)?
                    }
                    Err(e) => return Err(e),
                }
                key
            }
            None => {
                let key = self.sources.vacant_key();
                let tok = mio_token(key, generation);
                match registry.register(&mut SourceFd(&fd), tok, to_mio(interest)) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EPERM) => return Ok(None),
                    Err(e) if e.raw_os_error() == Some(libc::EBADF) => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!("fd {fd} is not open"),
                        ));
                    }
                    Err(e) => return Err(e),
                }
                let inserted = self
                    .sources
                    .insert(Source::new(fd, interest, None, generation));
                debug_assert_eq!(inserted, key, "the token names the slot");
                self.by_fd.insert(fd, key);
                key
            }
        };
        let src = &mut self.sources[source];
        src.waiters.push(Waiter::new(token, interest));
        Ok(Some(Registration::new(source, src.generation)))
    }

    /// The source of `reg`, if it is still there.
    #[inline]
    fn source_of(&mut self, reg: Registration) -> Option<&mut Source> {
        self.sources
            .get_mut(reg.source())
            .filter(|src| src.generation == reg.generation())
    }

    /// The readiness the waiter of context `key` has seen so far.
    pub(crate) fn ready(&self, reg: Registration, key: Key) -> Interest {
        self.sources
            .get(reg.source())
            .filter(|src| src.generation == reg.generation())
            .and_then(|src| src.waiters.iter().find(|w| w.key() == key))
            .map_or(Interest::EMPTY, |w| w.ready)
    }

    /// Moves the waiter of `token`'s context to `token` (it parks again).
    pub(crate) fn retoken(&mut self, reg: Registration, token: WakeToken) {
        if let Some(src) = self.source_of(reg)
            && let Some(w) = src.waiters.iter_mut().find(|w| w.key() == token.key)
        {
            w.set_token(token);
        }
    }

    /// Removes the waiter of context `key`, and its fd from the epoll set if
    /// it was the last. Inline: every socket wait ends here (a one-shot
    /// fd's removal is out of line).
    #[inline]
    pub(crate) fn remove_waiter(&mut self, reg: Registration, key: Key) {
        // (A source that is gone: its slot may belong to another now.)
        let Some(src) = self.source_of(reg) else {
            return;
        };
        src.waiters.remove(key);
        if src.waiters.is_empty() && src.owner.is_none() {
            self.remove_one_shot(reg.source());
        }
    }

    /// Removes a one-shot fd's source, its last waiter gone.
    #[cold]
    #[inline(never)]
    fn remove_one_shot(&mut self, key: usize) {
        let src = self.sources.remove(key);
        self.by_fd.remove(src.fd);
        // The fd may have been closed meanwhile (EBADF/ENOENT): nothing to undo.
        let _ = self.poll.registry().deregister(&mut SourceFd(&src.fd));
    }

    fn new_generation(&mut self) -> u32 {
        // u32::MAX is skipped: with any slot it could spell WAKER or TIMER.
        self.next_generation = self.next_generation.wrapping_add(1) % u32::MAX;
        self.next_generation
    }

    /// Sets the timerfd to fire at `at` (absolute CLOCK_MONOTONIC ns), unless
    /// it already is.
    pub(crate) fn arm_timer(&mut self, at: u64) {
        if self.armed == Some(at) {
            return;
        }
        set_timerfd(&self.timerfd, at);
        self.armed = Some(at);
    }

    /// Waits for events (at most `timeout`; `None`: until one comes) and
    /// pushes the tokens of the waiters they make ready onto `wake`; the
    /// tasks they make ready are in the result (see [`Polled`]).
    ///
    /// Inlined (with [`Reactor::poll_fds`]) into the runtime's one caller,
    /// its turn: one frame fewer to set up and tear down after each wait.
    #[inline(always)]
    pub(crate) fn poll(
        &mut self,
        timeout: Option<Duration>,
        wake: &mut Vec<WakeToken>,
    ) -> io::Result<Polled> {
        // (What async tasks need is tested here and done out of line: most
        // turns of a server of fibers have none, and the code of each turn
        // stays a few cache lines fewer.)
        if self.task_timerfd.is_some() {
            self.arm_task_timer();
        }
        let mut polled = self.poll_fds(timeout, wake)?;
        if !self.task_timers.is_empty() {
            self.fire_task_timers();
        }
        if !self.woken_tasks.is_empty() || !self.unneeded.is_empty() {
            polled.tasks = Some(self.take_task_wakes());
        }
        Ok(polled)
    }

    #[cold]
    #[inline(never)]
    fn fire_task_timers(&mut self) {
        self.task_timers
            .advance(clock::now_ns(), &mut self.fired_tasks);
        self.woken_tasks
            .extend(self.fired_tasks.drain(..).map(|f| f.value));
    }

    #[cold]
    #[inline(never)]
    fn take_task_wakes(&mut self) -> Box<TaskWakes> {
        Box::new(TaskWakes {
            wake: std::mem::take(&mut self.woken_tasks),
            drop: std::mem::take(&mut self.unneeded),
        })
    }
}

impl Reactor {
    /// The epoll part of [`Reactor::poll`].
    #[inline(always)]
    fn poll_fds(
        &mut self,
        timeout: Option<Duration>,
        wake: &mut Vec<WakeToken>,
    ) -> io::Result<Polled> {
        let mut polled = Polled::default();
        self.events.wait(self.poll.as_raw_fd(), timeout)?;
        polled.any = !self.events.is_empty();
        let mut completed = false;
        for (tok, bits) in self.events.iter() {
            match Token(tok) {
                WAKER => polled.remote = true,
                RING => completed = true,
                TIMER => self.armed = None, // expired; the caller advances the wheel
                TASK_TIMER => self.task_armed = None, // expired; `poll` advances the wheel
                _ => {
                    let (key, generation) = (tok & 0xFFFF_FFFF, (tok >> 32) as u32);
                    let Some(src) = self.sources.get_mut(key) else {
                        continue;
                    };
                    if src.generation != generation {
                        continue; // an event of a registration that is gone
                    }
                    let (ready, closed) = events::readiness(bits);
                    src.drained = Interest(src.drained.0 & !ready.0);
                    src.closed = src.closed | closed;
                    src.waiters.mark_ready(ready, wake);
                    let with_task = ready & src.tasks;
                    if !with_task.is_empty() {
                        src.take_tasks(with_task, &mut self.woken_tasks);
                    }
                }
            }
        }
        if completed {
            self.reap(true, wake);
        }
        Ok(polled)
    }
}

fn to_mio(interest: Interest) -> mio::Interest {
    let rw = match (interest.is_readable(), interest.is_writable()) {
        (true, true) => mio::Interest::READABLE | mio::Interest::WRITABLE,
        (false, true) => mio::Interest::WRITABLE,
        (true, false) => mio::Interest::READABLE,
        (false, false) if interest.is_priority() => return mio::Interest::PRIORITY,
        (false, false) => mio::Interest::READABLE,
    };
    if interest.is_priority() {
        rw | mio::Interest::PRIORITY
    } else {
        rw
    }
}
