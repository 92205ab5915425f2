//! What the hooks remember per fd number: whether it is a socket, and the
//! id its reactor registrations carry.
//!
//! One word per fd, in chunks of [`CHUNK`] fds mapped on first use, so a
//! lookup is two loads and no lock, allocation or system call: safe in a
//! signal handler. A word is
//!
//! - `0`: not known (never looked at, or closed since);
//! - `1`: not a socket (a file, pipe, tty, eventfd...): hooks leave it alone;
//! - `uid << 1`: a socket; `uid` is unique in the process for this opening
//!   of the fd number — drawn from the one id space of every socket
//!   registration, `fibra::net`'s included (`reactor::new_socket_owner`) —
//!   and is the owner of its registrations in a reactor (see
//!   `reactor::Reactor::socket`), so a socket that reuses a closed
//!   socket's number is never taken for it, whichever kind either is.
//!
//! ## Ground rules
//!
//! - The word is filled, from the kernel (`getsockopt(SO_TYPE)`), by the
//!   first hook that needs it, and cleared by the hooks of `close`, `dup2`
//!   and `dup3` (before and after the kernel closes the fd). Fds closed
//!   behind libc's back (a raw `close` system call) are not seen: see the
//!   module docs of `hook`.
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
const NOT_SOCKET: u64 = 1;

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

/// The uid of `fd` if it is a socket the hooks may park on; `None` for
/// anything else (not a socket, not open, out of range).
#[inline]
pub(super) fn socket(fd: c_int) -> Option<u64> {
    let slot = slot(fd, true)?;
    let word = slot.load(Ordering::Relaxed);
    match word {
        UNKNOWN => fill(fd, slot),
        NOT_SOCKET => None,
        _ => Some(word >> 1),
    }
}

#[cold]
fn fill(fd: c_int, slot: &AtomicU64) -> Option<u64> {
    let word = match sys::sockopt(fd, libc::SO_TYPE, 0 as c_int) {
        Ok(_) => crate::reactor::new_socket_owner() << 1,
        Err(e) if e == -(libc::ENOTSOCK as isize) => NOT_SOCKET,
        Err(_) => return None, // not open: the real call will say so
    };
    let word = match slot.compare_exchange(UNKNOWN, word, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => word,
        Err(theirs) => theirs,
    };
    (word != NOT_SOCKET).then_some(word >> 1)
}

/// Records that `fd` turned out not to be a socket (its number was
/// reused behind our back).
pub(super) fn mark_not_socket(fd: c_int) {
    if let Some(slot) = slot(fd, false) {
        slot.store(NOT_SOCKET, Ordering::Relaxed);
    }
}

/// Forgets `fd` (it is being closed); returns its socket uid, if it had one.
#[inline]
pub(super) fn forget(fd: c_int) -> Option<u64> {
    let word = slot(fd, false)?.swap(UNKNOWN, Ordering::Relaxed);
    (word > NOT_SOCKET).then_some(word >> 1)
}
