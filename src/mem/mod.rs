//! Memory of our own: arrays in mappings of their own, which grow by
//! `mremap` (no copy, no page touched) and ask for transparent huge pages
//! once large. The runtime's per-fiber tables live here: the fiber records
//! and the timer wheel's entries, a million of each in a burst of a million
//! sleepers.

use std::sync::atomic::{AtomicUsize, Ordering};

mod array;
mod slab;

pub(crate) use array::MappedArray;
pub(crate) use slab::MappedSlab;

/// The system page size.
#[inline]
pub(crate) fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    match PAGE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: sysconf has no preconditions.
            let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
                .ok()
                .filter(|&p| p > 0)
                .unwrap_or(4096);
            PAGE.store(page, Ordering::Relaxed);
            page
        }
        page => page,
    }
}
