//! Sockets' registrations: one per socket, for reading and writing at
//! once, kept until the socket deregisters, and the readiness a short read
//! or write showed gone (see "Sockets" in the module docs).

use std::io;
use std::num::NonZeroU64;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use mio::unix::SourceFd;

use super::Interest;
use super::{Reactor, Registration, Source, Waiter, mio_token, to_mio};
use crate::reactor::token::WakeToken;

impl Reactor {
    /// The source of socket `owner` on `fd`, registering the fd (for reading
    /// and writing, edge-triggered) on first use. A source left behind by
    /// another socket on the same fd number is taken over with a new
    /// generation; its waiters (of a closed socket) are woken.
    #[inline]
    pub(crate) fn socket(
        &mut self,
        fd: RawFd,
        owner: u64,
        wake: &mut Vec<WakeToken>,
    ) -> io::Result<usize> {
        match self.owned(fd, owner) {
            Some(key) => Ok(key),
            None => self.register_socket(fd, owner, wake),
        }
    }

    /// [`Reactor::socket`] for a socket not registered here yet: out of
    /// line, so that the wait of a registered one, at every round trip of a
    /// connection, runs no more code and pushes no deeper frame than the
    /// lookup needs (with a thousand connections each stack line it writes
    /// comes back cold).
    #[cold]
    #[inline(never)]
    fn register_socket(
        &mut self,
        fd: RawFd,
        owner: u64,
        wake: &mut Vec<WakeToken>,
    ) -> io::Result<usize> {
        let both = Interest::READABLE | Interest::WRITABLE;
        if let Some(key) = self.by_fd.get(fd) {
            // Another registration of this fd number: a one-shot `io::wait`
            // on this very socket (kept as it is: its waiters stay valid),
            // or a stale one of a closed socket (a new generation: its
            // events and waiters are void, and its waiters learn it by
            // waking).
            let generation = match self.sources[key].owner {
                Some(_) => self.new_generation(),
                None => self.sources[key].generation,
            };
            let src = &mut self.sources[key];
            if src.owner.is_some() {
                src.waiters.drain_tokens(wake);
            }
            // A task of the closed socket is not woken: its socket is gone
            // (and a task of a later socket polls that one's own source).
            src.forget_tasks(&mut self.unneeded);
            src.owner = socket_owner(owner);
            src.generation = generation;
            src.interest = both;
            src.drained = Interest::EMPTY;
            src.closed = Interest::EMPTY;
            let registry = self.poll.registry();
            let tok = mio_token(key, generation);
            match registry.reregister(&mut SourceFd(&fd), tok, to_mio(both)) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    registry.register(&mut SourceFd(&fd), tok, to_mio(both))?
                }
                Err(e) => return Err(e),
            }
            return Ok(key);
        }
        let generation = self.new_generation();
        let key = self.sources.vacant_key();
        self.poll.registry().register(
            &mut SourceFd(&fd),
            mio_token(key, generation),
            to_mio(both),
        )?;
        let inserted = self
            .sources
            .insert(Source::new(fd, both, socket_owner(owner), generation));
        debug_assert_eq!(inserted, key, "the token names the slot");
        self.by_fd.insert(fd, key);
        Ok(key)
    }

    /// The source of socket `owner` on `fd`, if it is registered here.
    #[inline]
    pub(crate) fn owned(&self, fd: RawFd, owner: u64) -> Option<usize> {
        let key = self.by_fd.get(fd)?;
        self.sources
            .get(key)
            .is_some_and(|src| src.owned_by(owner))
            .then_some(key)
    }

    /// Socket `owner`'s source on `fd`, if it is registered here: one
    /// lookup of the slot (`owned` and an index after it checked the slot
    /// twice, on the path of every socket call).
    #[inline(always)]
    fn owned_source(&mut self, fd: RawFd, owner: u64) -> Option<&mut Source> {
        let key = self.by_fd.get(fd)?;
        self.sources.get_mut(key).filter(|src| src.owned_by(owner))
    }

    /// Whether socket `owner` on `fd` is known not to be ready for
    /// `interest`: a short read or write said so, and no event since.
    #[inline]
    pub(crate) fn is_drained(&mut self, fd: RawFd, owner: u64, interest: Interest) -> bool {
        self.owned_source(fd, owner)
            .is_some_and(|src| !(src.drained & interest).is_empty())
    }

    /// Records that a short read or write left socket `owner` on `fd` not
    /// ready for `interest` (if it is registered here; else the next call
    /// just tries its syscall).
    #[inline]
    pub(crate) fn mark_drained(&mut self, fd: RawFd, owner: u64, interest: Interest) {
        if let Some(src) = self.owned_source(fd, owner) {
            src.drained = src.drained | Interest(interest.0 & !src.closed.0);
        }
    }

    /// Registers a waiter on a socket's source (see [`Reactor::socket`]).
    /// Inline: every socket wait starts here.
    #[inline]
    pub(crate) fn add_socket_waiter(
        &mut self,
        key: usize,
        interest: Interest,
        token: WakeToken,
    ) -> Registration {
        let src = &mut self.sources[key];
        src.waiters.push(Waiter::new(token, interest));
        Registration::new(key, src.generation)
    }

    /// Removes socket `owner`'s registration of `fd`, if it has one here.
    pub(crate) fn deregister_socket(&mut self, fd: RawFd, owner: u64, wake: &mut Vec<WakeToken>) {
        let Some(key) = self.by_fd.get(fd) else {
            return;
        };
        if !self.sources[key].owned_by(owner) {
            return;
        }
        let mut src = self.sources.remove(key);
        self.by_fd.remove(fd);
        src.waiters.drain_tokens(wake);
        src.forget_tasks(&mut self.unneeded);
        let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
    }
}

/// A new socket owner id, unique in the process: the tag a socket's
/// registrations carry in every reactor ([`Reactor::socket`]).
///
/// There is one id space for every kind of socket — `fibra::net`'s
/// sockets and the sockets the `hook` feature registers — because a
/// reactor takes an id as the sole owner of an fd's source: were two
/// counters to hand out the same number, a socket of one kind could be
/// matched to the stale source a closed socket of the other kind left on
/// the same fd number, and wait on a source epoll no longer watches.
/// Ids count from 1, so none is zero.
pub(crate) fn new_socket_owner() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A socket's id as a source keeps it (see [`new_socket_owner`]).
fn socket_owner(owner: u64) -> Option<NonZeroU64> {
    let owner = NonZeroU64::new(owner);
    debug_assert!(owner.is_some(), "a socket id of 0");
    owner
}
