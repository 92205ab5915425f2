//! What a park waits for: a [`WaitOn`], as dumps show it, and the
//! [`StoredWait`] form a fiber's record keeps it in.

use std::fmt;
use std::os::fd::RawFd;
use std::ptr;

use crate::reactor::Interest;
use crate::scheduler::fiber_id::FiberId;

/// What a park waits for, as [`Runtime::dump`](crate::Runtime::dump) shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitOn {
    Sleep,
    Fd(RawFd, Interest),
    Join(FiberId),
    /// A primitive of `fibra::sync`, by the name of the call (behind a
    /// reference, so that it fits [`StoredWait`]'s word).
    Sync(&'static &'static str),
    Signal,
    Future,
    Blocking,
    Scope,
}

/// A [`WaitOn`] as a fiber's record keeps it: a tag and a word (which
/// gdb's `info fibers` decodes too: `src/observe/debugger/gdb_fibers.py`), written
/// at every park with two plain stores. (An `Option<WaitOn>` was built on
/// the stack and copied into the record with loads wider than the stores
/// that had just written it, which the CPU cannot forward: a stall of a
/// dozen cycles per park.)
#[derive(Clone, Copy, Debug)]
pub(crate) struct StoredWait {
    /// 0: nothing recorded; otherwise which `WaitOn`, from 1.
    tag: u8,
    word: u64,
}

impl StoredWait {
    /// Where a debugger reads the tag (a byte) and the word, in bytes from
    /// a `StoredWait`'s address (`observe::debugger`).
    pub(crate) const TAG_AT: usize = std::mem::offset_of!(StoredWait, tag);
    pub(crate) const WORD_AT: usize = std::mem::offset_of!(StoredWait, word);

    pub(crate) const NONE: StoredWait = StoredWait { tag: 0, word: 0 };

    #[inline(always)]
    pub(crate) fn new(on: WaitOn) -> StoredWait {
        let (tag, word) = match on {
            WaitOn::Sleep => (1, 0),
            WaitOn::Fd(fd, interest) => (2, u64::from(fd as u32) | u64::from(interest.0) << 32),
            WaitOn::Join(id) => (3, id.as_u64()),
            WaitOn::Sync(name) => (Self::SYNC_TAG, ptr::from_ref(name) as u64),
            WaitOn::Signal => (5, 0),
            WaitOn::Future => (6, 0),
            WaitOn::Blocking => (7, 0),
            WaitOn::Scope => (8, 0),
        };
        StoredWait { tag, word }
    }

    /// The tag of a [`WaitOn::Sync`], whose word is the address of a
    /// `&'static str` (a reader of raw records reads the text there).
    pub(crate) const SYNC_TAG: u8 = 4;

    /// The `WaitOn` of a raw `tag` and `word` read from a record, if any,
    /// and if it can be made without reading memory: not for
    /// [`StoredWait::SYNC_TAG`].
    pub(crate) fn plain(tag: u8, word: u64) -> Option<WaitOn> {
        match tag {
            Self::SYNC_TAG => None,
            _ => StoredWait { tag, word }.get(),
        }
    }

    /// The `WaitOn` this was made from, if any.
    pub(crate) fn get(self) -> Option<WaitOn> {
        let word = self.word;
        Some(match self.tag {
            0 => return None,
            1 => WaitOn::Sleep,
            2 => WaitOn::Fd(word as u32 as RawFd, Interest((word >> 32) as u8)),
            3 => WaitOn::Join(FiberId::from_u64(word)?),
            // SAFETY: the fields are private and only `new` sets them: tag
            // 4 comes with the address of a `&'static &'static str`.
            Self::SYNC_TAG => WaitOn::Sync(unsafe { &*(word as *const &'static str) }),
            5 => WaitOn::Signal,
            6 => WaitOn::Future,
            7 => WaitOn::Blocking,
            _ => WaitOn::Scope,
        })
    }
}

impl fmt::Display for WaitOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitOn::Sleep => f.write_str("sleep"),
            WaitOn::Fd(fd, interest) => write!(f, "fd {fd} {interest:?}"),
            WaitOn::Join(id) => write!(f, "join of fiber {id}"),
            WaitOn::Sync(what) => f.write_str(what),
            WaitOn::Signal => f.write_str("signal::wait"),
            WaitOn::Future => f.write_str("block_on_future"),
            WaitOn::Blocking => f.write_str("spawn_blocking"),
            WaitOn::Scope => f.write_str("the fibers of its scope"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_wait_gives_back_what_it_was_made_from() {
        let id = FiberId::from_u64(77).unwrap();
        let all = [
            WaitOn::Sleep,
            WaitOn::Fd(0, Interest::READABLE),
            WaitOn::Fd(i32::MAX, Interest::READABLE | Interest::WRITABLE),
            WaitOn::Join(id),
            WaitOn::Sync(&"Mutex::lock"),
            WaitOn::Signal,
            WaitOn::Future,
            WaitOn::Blocking,
            WaitOn::Scope,
        ];
        for on in all {
            assert_eq!(StoredWait::new(on).get(), Some(on));
            assert_eq!(
                StoredWait::new(on).get().unwrap().to_string(),
                on.to_string()
            );
        }
        assert_eq!(StoredWait::NONE.get(), None);
    }
}
