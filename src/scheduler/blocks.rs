//! A runtime's few free heap blocks for join packets.
//!
//! Every spawn allocates a packet (see `fiber::join`) and every join frees
//! it: with glibc's allocator that pair was a tenth of a spawn and join.
//! Packets of results up to [`BLOCK_BYTES`] share one block layout, so a
//! runtime keeps up to [`CACHED_BLOCKS`] freed blocks and hands them out
//! again with a `Vec` push and pop. A packet freed on a thread without a
//! runtime, or when the cache is full, goes back to the global allocator,
//! which is where every block comes from and goes to in the end.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// The size of a block: a packet of a result up to a few words, with its
/// state, waiter and scope (a packet of `()` takes 80 bytes).
pub(crate) const BLOCK_BYTES: usize = 128;

/// How many free blocks a runtime keeps.
const CACHED_BLOCKS: usize = 64;

/// The layout of every block.
pub(crate) const BLOCK: Layout = match Layout::from_size_align(BLOCK_BYTES, 16) {
    Ok(layout) => layout,
    Err(_) => panic!("bad block layout"),
};

/// Whether values of layout `layout` fit in a block.
pub(crate) const fn fits(layout: Layout) -> bool {
    layout.size() <= BLOCK.size() && layout.align() <= BLOCK.align()
}

/// Free blocks, allocated with [`BLOCK`].
pub(crate) struct Blocks {
    free: Vec<NonNull<u8>>,
}

impl Blocks {
    pub(crate) fn new() -> Blocks {
        Blocks {
            free: Vec::with_capacity(CACHED_BLOCKS),
        }
    }

    /// A block from the cache, if it has one.
    #[inline]
    pub(crate) fn take(&mut self) -> Option<NonNull<u8>> {
        self.free.pop()
    }

    /// Keeps a free block, or gives it back when the cache is full.
    ///
    /// # Safety
    ///
    /// `block` was allocated with the global allocator and [`BLOCK`], and
    /// nothing uses it any more.
    #[inline]
    pub(crate) unsafe fn give_back(&mut self, block: NonNull<u8>) {
        if self.free.len() < CACHED_BLOCKS {
            self.free.push(block);
        } else {
            // SAFETY: forwarded from the caller.
            unsafe { alloc::dealloc(block.as_ptr(), BLOCK) };
        }
    }
}

impl Drop for Blocks {
    fn drop(&mut self) {
        for block in self.free.drain(..) {
            // SAFETY: every cached block came from `give_back`, whose
            // caller vouched for its layout and that it was free.
            unsafe { alloc::dealloc(block.as_ptr(), BLOCK) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_fits_and_reuses_it_last_in_first_out() {
        let mut blocks = Blocks::new();
        assert!(blocks.take().is_none());
        // SAFETY: BLOCK has a non-zero size.
        let new = || NonNull::new(unsafe { alloc::alloc(BLOCK) }).unwrap();
        let all: Vec<NonNull<u8>> = (0..CACHED_BLOCKS + 2).map(|_| new()).collect();
        let last_kept = all[CACHED_BLOCKS - 1];
        for block in all {
            // SAFETY: allocated above with BLOCK, unused.
            unsafe { blocks.give_back(block) };
        }
        assert_eq!(blocks.free.len(), CACHED_BLOCKS);
        assert_eq!(blocks.take(), Some(last_kept));
    }

    #[test]
    fn small_packets_fit() {
        assert!(fits(Layout::new::<[u64; 16]>()));
        assert!(!fits(Layout::new::<[u64; 17]>()));
    }
}
