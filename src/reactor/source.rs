//! A watched fd's state in the reactor ([`Source`]): who owns it, its
//! waiters, what its events and short transfers showed, its async tasks'
//! wakers; laid out for the round trip of a socket.

use std::num::NonZeroU64;
use std::os::fd::RawFd;
use std::task::Waker;

use super::Interest;
use super::waiters::Waiters;

/// One fd the reactor watches: a socket's registration (kept until the
/// socket deregisters) or a one-shot `io::wait`'s.
///
/// Laid out by hand in two cache lines, aligned to one (a slot of the slab
/// is then exactly two lines: the slab's own tag takes a niche of a field):
/// the first holds all that a socket's round trip reads and writes (its
/// owner and generation, what was drained or closed, the waiters in place);
/// the second what is rare: the fd (used to deregister), any waiters
/// beyond two, the async tasks' wakers (`tasks` says whether there are
/// any). With a thousand connections a trip found its source cold in two
/// or three lines (it was 144 bytes, at 16 past a line).
#[repr(C, align(64))]
pub(super) struct Source {
    // ---- the first line
    /// The socket that owns this registration (it stays until the socket
    /// deregisters); `None` for the one-shot registrations of `io::wait`.
    pub(super) owner: Option<NonZeroU64>,
    /// Changes whenever the slot or its owner changes; part of the token.
    pub(super) generation: u32,
    /// What the fd is registered for (the union of its waiters' interests).
    pub(super) interest: Interest,
    /// Readiness that a short read or write showed gone, with no event
    /// since: a syscall would only say `WouldBlock` (sockets only).
    pub(super) drained: Interest,
    /// Directions an event reported closed (a FIN, an error): a short read
    /// then does not mean the next one would block (it returns 0 or the
    /// error), and no new edge will come to say so.
    pub(super) closed: Interest,
    /// The directions that have a task waker in `reader` / `writer`.
    pub(super) tasks: Interest,
    /// Its inline part in this line, its vector in the next.
    pub(super) waiters: Waiters,
    // ---- the second line
    pub(super) fd: RawFd,
    /// The wakers of the async tasks waiting to read and to write (sockets
    /// only).
    pub(super) reader: Option<Waker>,
    pub(super) writer: Option<Waker>,
}

const _: () = assert!(size_of::<Source>() == 128);
const _: () = assert!(crate::mem::MappedSlab::<Source>::SLOT_SIZE == 128);
const _: () = assert!(std::mem::offset_of!(Source, waiters) + 2 * 16 < 64);

impl Source {
    /// A source with no waiters yet, nothing drained or closed, no task.
    pub(super) fn new(
        fd: RawFd,
        interest: Interest,
        owner: Option<NonZeroU64>,
        generation: u32,
    ) -> Source {
        Source {
            owner,
            generation,
            interest,
            drained: Interest::EMPTY,
            closed: Interest::EMPTY,
            tasks: Interest::EMPTY,
            waiters: Waiters::new(),
            fd,
            reader: None,
            writer: None,
        }
    }

    /// Whether socket `owner` owns this source.
    #[inline(always)]
    pub(super) fn owned_by(&self, owner: u64) -> bool {
        self.owner.is_some_and(|o| o.get() == owner)
    }

    /// Takes the task wakers of `directions` (some of `tasks`) into `to`.
    #[cold]
    #[inline(never)]
    pub(super) fn take_tasks(&mut self, directions: Interest, to: &mut Vec<Waker>) {
        if directions.is_readable() {
            to.extend(self.reader.take());
        }
        if directions.is_writable() {
            to.extend(self.writer.take());
        }
        self.tasks = Interest(self.tasks.0 & !directions.0);
    }

    /// Moves this source's task wakers to `to` (they are not to be woken:
    /// the socket is gone).
    pub(super) fn forget_tasks(&mut self, to: &mut Vec<Waker>) {
        to.extend(self.reader.take());
        to.extend(self.writer.take());
        self.tasks = Interest::EMPTY;
    }
}
