//! What the hooks remember per fd number: whether calls on it may park
//! (a socket, or another fd epoll can watch), and the id its reactor
//! registrations carry.
//!
//! One word per fd, in chunks of [`CHUNK`] fds mapped on first use, so a
//! lookup is two loads and no lock, allocation or system call: safe in a
//! signal handler. A word is
//!
//! - `0`: not known (never looked at, or closed since);
//! - `1`: left alone: a regular file, a directory, a block device (file
//!   I/O belongs on the blocking pool: `fibra::fs`);
//! - `uid << 3 | 2`: a socket; `uid << 3 | 3`: another pollable fd — a
//!   pipe or FIFO, a character device (a tty), an anonymous inode (an
//!   eventfd, a timerfd, a signalfd) — with bit 2 set once the kernel said
//!   it has no per-call non-blocking form of `read`/`write` for it
//!   (`RWF_NOWAIT`: `EOPNOTSUPP`), so calls on it stop asking.
//!
//! `uid` is unique in the process for this opening of the fd number —
//! drawn from the one id space of every socket registration, `fibra::net`'s
//! included (`reactor::new_socket_owner`) — and is the owner of its
//! registrations in a reactor (see `reactor::Reactor::socket`), so an fd
//! that reuses a closed one's number is never taken for it, whichever kind
//! either is.
//!
//! ## Ground rules
//!
//! - The word is filled, from the kernel (`getsockopt(SO_TYPE)`, then
//!   `fstat`), by the first hook that needs it, and cleared by the hooks of
//!   `close`, `dup2` and `dup3` (before and after the kernel closes the
//!   fd). Fds closed behind libc's back (a raw `close` system call) are not
//!   seen: see the module docs of `hook`.
//! - Fds from [`MAX_FDS`] up are never remembered: hooks leave them alone.

use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use libc::c_int;

use super::sys;

/// Fds per chunk (a chunk is 32 KiB).
const CHUNK: usize = 4096;
/// Chunks: fds below `CHUNK * CHUNKS` are remembered.
const CHUNKS: usize = 1024;
/// The first fd number the hooks do not remember.
pub(super) const MAX_FDS: usize = CHUNK * CHUNKS;

const UNKNOWN: u64 = 0;
const IGNORED: u64 = 1;
const SOCKET: u64 = 2;
const POLLABLE: u64 = 3;
/// The kind's bits of a word.
const KIND: u64 = 3;
/// The kernel has no `RWF_NOWAIT` for this fd.
const NO_NOWAIT: u64 = 4;
/// How far a word's uid is shifted.
const UID_SHIFT: u32 = 3;

/// An fd the hooks may park on.
#[derive(Clone, Copy, Debug)]
///
/// Its table word itself, read through the methods: one register on the
/// path of every hooked call (as three fields, the hooks' frames grew and
/// a hooked echo client ran more instructions a trip).
pub(super) struct Fd(u64);

impl Fd {
    #[inline(always)]
    fn of(word: u64) -> Option<Fd> {
        (word > IGNORED).then_some(Fd(word))
    }

    /// The owner id of its registrations.
    #[inline(always)]
    pub(super) fn uid(&self) -> u64 {
        self.0 >> UID_SHIFT
    }

    /// A socket (else a pipe, tty, eventfd...: no socket options).
    #[inline(always)]
    pub(super) fn is_socket(&self) -> bool {
        self.0 & KIND == SOCKET
    }

    /// `RWF_NOWAIT` is worth a try (see [`mark_no_nowait`]).
    #[inline(always)]
    pub(super) fn nowait(&self) -> bool {
        self.0 & NO_NOWAIT == 0
    }
}

static TABLE: [AtomicPtr<AtomicU64>; CHUNKS] = [const { AtomicPtr::new(ptr::null_mut()) }; CHUNKS];

/// The word of `fd`, mapping its chunk if `create`; `None` for fds out of
/// range, or when the chunk is not there (and not to be made, or mmap
/// failed).
fn slot(fd: c_int, create: bool) -> Option<&'static AtomicU64> {
    let fd = usize::try_from(fd).ok().filter(|&fd| fd < MAX_FDS)?;
    let (chunk, index) = (fd / CHUNK, fd % CHUNK);
    let mut base = TABLE[chunk].load(Ordering::Acquire);
    if base.is_null() {
        if !create {
            return None;
        }
        base = map_chunk(&TABLE[chunk])?;
    }
    // SAFETY: `base` points to CHUNK words, zeroed when mapped and never
    // unmapped, and `index < CHUNK`.
    Some(unsafe { &*base.add(index) })
}

/// Maps a zeroed chunk and installs it, or takes the one another thread
/// installed first. mmap, not the allocator: this may run in a signal
/// handler.
#[cold]
fn map_chunk(entry: &AtomicPtr<AtomicU64>) -> Option<*mut AtomicU64> {
    let bytes = CHUNK * size_of::<AtomicU64>();
    // SAFETY: an anonymous private mapping touches nothing of ours.
    let p = unsafe {
        sys::call6(
            libc::SYS_mmap,
            0,
            bytes,
            (libc::PROT_READ | libc::PROT_WRITE) as usize,
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as usize,
            usize::MAX, // fd -1
            0,
        )
    };
    if (-4095..0).contains(&p) {
        return None;
    }
    let new = p as *mut AtomicU64;
    match entry.compare_exchange(ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Some(new),
        Err(theirs) => {
            // SAFETY: our mapping, never published.
            unsafe { sys::call(libc::SYS_munmap, &[new as usize, bytes]) };
            Some(theirs)
        }
    }
}

/// What `fd` is, if the hooks may park on it; `None` for anything else (a
/// file, not open, out of range).
#[inline]
pub(super) fn lookup(fd: c_int) -> Option<Fd> {
    let slot = slot(fd, true)?;
    match slot.load(Ordering::Relaxed) {
        UNKNOWN => fill(fd, slot),
        word => Fd::of(word),
    }
}

#[cold]
fn fill(fd: c_int, slot: &AtomicU64) -> Option<Fd> {
    let kind = match sys::sockopt(fd, libc::SO_TYPE, 0 as c_int) {
        Ok(_) => SOCKET,
        Err(e) if e == -(libc::ENOTSOCK as isize) => match sys::file_type(fd)? {
            libc::S_IFREG | libc::S_IFDIR | libc::S_IFBLK | libc::S_IFLNK => IGNORED,
            _ => POLLABLE, // FIFO, character device, anonymous inode (0)
        },
        Err(_) => return None, // not open: the real call will say so
    };
    let word = match kind {
        IGNORED => IGNORED,
        kind => crate::reactor::new_socket_owner() << UID_SHIFT | kind,
    };
    let word = match slot.compare_exchange(UNKNOWN, word, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => word,
        Err(theirs) => theirs,
    };
    Fd::of(word)
}

/// Records that `fd` is to be left alone after all (its number was reused
/// behind our back, by a file).
pub(super) fn mark_ignored(fd: c_int) {
    if let Some(slot) = slot(fd, false) {
        slot.store(IGNORED, Ordering::Relaxed);
    }
}

/// Records that the kernel has no `RWF_NOWAIT` for `fd`, opened as `what`
/// (untouched if the number has since been closed or reused).
#[cold]
pub(super) fn mark_no_nowait(fd: c_int, what: Fd) {
    if let Some(slot) = slot(fd, false) {
        let word = what.0;
        let _ = slot.compare_exchange(word, word | NO_NOWAIT, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// Forgets `fd` (it is being closed); returns its uid, if it had one.
#[inline]
pub(super) fn forget(fd: c_int) -> Option<u64> {
    let word = slot(fd, false)?.swap(UNKNOWN, Ordering::Relaxed);
    Fd::of(word).map(|f| f.uid())
}
