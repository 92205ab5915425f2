//! The array a runtime's fiber records live in ([`Slots`]): a `Vec` of
//! records in all but how it grows.
//!
//! A record is aligned to a cache line (see `record.rs`). The global
//! allocator cannot grow an allocation of that alignment in place: std's
//! `realloc` for it allocates anew, copies and frees, where glibc's grows a
//! large block of ordinary alignment with `mremap`. For a burst of a
//! million fibers a `Vec` of records copied every record again at each
//! doubling, and faulted in the pages of each copy: 36 000 page faults
//! more in `million-child fibra` (1 116 000 against 1 080 000). So the
//! slots are a private anonymous mapping of their own, page-aligned, which
//! `mremap` grows without copying or touching a page, and which asks for
//! transparent huge pages once it can hold one (see `Slots::advise_huge`).

use std::alloc::Layout;
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};

use crate::scheduler::core::record::Record;
use crate::stack::page_size;

/// A growable array of records in a mapping of its own.
///
/// # Invariant
///
/// `ptr` is the start of a private anonymous read-write mapping of
/// `cap * size_of::<Record>()` bytes (a whole number of pages), owned by
/// this value; its first `len` records are initialised.
pub(crate) struct Slots {
    ptr: NonNull<Record>,
    len: usize,
    cap: usize,
}

const RECORD: usize = size_of::<Record>();

/// The size of an x86_64 transparent huge page.
const HUGE_PAGE: usize = 2 << 20;

impl Slots {
    /// Room for at least `capacity` records (at least a page of them).
    pub(crate) fn with_capacity(capacity: usize) -> Slots {
        let bytes = capacity
            .max(1)
            .checked_mul(RECORD)
            .and_then(|b| b.checked_next_multiple_of(page_size()))
            .expect("fibra: too many fiber records");
        // A page holds whole records (both are powers of two, a record
        // the smaller), so the mapping does too: `cap` below covers it all.
        assert_eq!(
            bytes % RECORD,
            0,
            "fibra: a page size that is not a power of two"
        );
        // SAFETY: a new private anonymous mapping, shared with nothing; the
        // result is checked.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let slots = Slots {
            ptr: mapped(p, bytes),
            len: 0,
            cap: bytes / RECORD,
        };
        slots.advise_huge();
        slots
    }

    /// Asks for transparent huge pages once the mapping is large enough to
    /// hold one (16 384 records): a burst of spawns then takes a page fault
    /// per 2 MiB of records instead of one per 32 records. In a million
    /// fibers that is 31 000 faults fewer (`million-child fibra`: 1 082 000
    /// against 1 051 000): at the 2.4 us of system time a fault costs on
    /// the development VM, some 3% of the burst, less than that VM's
    /// swings let a time show. The kernel decides:
    /// without THP (`never`), or without a free huge page, the advice does
    /// nothing and the records get ordinary pages. Where it compacts memory
    /// to make a huge page (`defrag` at `madvise`, Debian's default), the
    /// spawn that first touches a 2 MiB stretch may wait for that, once per
    /// stretch: records are reused, and the mapping never shrinks.
    fn advise_huge(&self) {
        let bytes = self.cap * RECORD;
        if bytes >= HUGE_PAGE {
            // SAFETY: advice about our own mapping (see the invariant),
            // which neither moves nor changes its contents; a failure
            // (no THP in this kernel) leaves it as it was.
            unsafe { libc::madvise(self.ptr.as_ptr().cast(), bytes, libc::MADV_HUGEPAGE) };
        }
    }

    /// Appends `record`, growing the mapping if it is full.
    pub(crate) fn push(&mut self, record: Record) {
        if self.len == self.cap {
            self.grow();
        }
        // SAFETY: `len < cap`: the slot is inside the mapping, and not
        // initialised yet (nothing to drop).
        unsafe { self.ptr.as_ptr().add(self.len).write(record) };
        self.len += 1;
    }

    /// Doubles the mapping. It may move: like a `Vec`'s growth, this
    /// invalidates every reference into it (the borrow checker sees to
    /// that: `push` takes `&mut self`).
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let old = self.cap * RECORD;
        let new = old.checked_mul(2).expect("fibra: too many fiber records");
        // SAFETY: `ptr` and `old` are our mapping (see the invariant);
        // MREMAP_MAYMOVE may move it, and nothing refers into it during
        // this call (`&mut self`). The result is checked.
        let p = unsafe { libc::mremap(self.ptr.as_ptr().cast(), old, new, libc::MREMAP_MAYMOVE) };
        self.ptr = mapped(p, new);
        self.cap = new / RECORD;
        self.advise_huge();
    }
}

/// The records of a mapping `mmap` or `mremap` returned, or the global
/// allocator's out-of-memory handling if it failed.
fn mapped(p: *mut libc::c_void, bytes: usize) -> NonNull<Record> {
    if p == libc::MAP_FAILED {
        let layout = Layout::from_size_align(bytes, page_size()).unwrap_or(Layout::new::<Record>());
        std::alloc::handle_alloc_error(layout);
    }
    // A mapping is page-aligned, so aligned for records.
    NonNull::new(p.cast())
        .unwrap_or_else(|| std::alloc::handle_alloc_error(Layout::new::<Record>()))
}

impl Deref for Slots {
    type Target = [Record];

    #[inline(always)]
    fn deref(&self) -> &[Record] {
        // SAFETY: the first `len` records are initialised (the invariant),
        // and borrowed with `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for Slots {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [Record] {
        // SAFETY: as for `deref`, borrowed mutably with `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        /// Unmaps the slots when dropped: after the records, and also if
        /// the drop of one of them unwinds.
        struct Unmap(*mut libc::c_void, usize);
        impl Drop for Unmap {
            fn drop(&mut self) {
                // SAFETY: the mapping is ours alone (the invariant) and,
                // its records dropped, is never used again.
                unsafe { libc::munmap(self.0, self.1) };
            }
        }
        let _unmap = Unmap(self.ptr.as_ptr().cast(), self.cap * RECORD);
        // SAFETY: the first `len` records are initialised and dropped once,
        // here (a slice's drop goes on past a record's drop that unwinds);
        // the mapping stays until `_unmap` goes.
        unsafe { ptr::drop_in_place(ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::core::record::State;

    #[test]
    fn grows_keeping_its_records_aligned_and_drops_them() {
        let name: std::sync::Arc<str> = "kept".into();
        let mut slots = Slots::with_capacity(1);
        let first_cap = slots.cap;
        assert!(first_cap >= 1);
        for i in 0..first_cap * 4 + 3 {
            let mut rec = Record::vacant();
            rec.state = State::Running;
            rec.park = i as u64;
            rec.name = Some(name.clone());
            slots.push(rec);
        }
        assert!(slots.cap >= slots.len() && slots.cap > first_cap);
        assert_eq!(slots.as_ptr() as usize % 64, 0, "records stay line-aligned");
        assert!(slots.iter().enumerate().all(|(i, r)| r.park == i as u64));
        assert_eq!(std::sync::Arc::strong_count(&name), 1 + slots.len());
        drop(slots);
        assert_eq!(
            std::sync::Arc::strong_count(&name),
            1,
            "every record dropped"
        );
    }

    #[test]
    fn keeps_its_records_across_growth_into_huge_pages() {
        // Past 2 MiB, where the mapping is advised to use huge pages (which
        // the kernel may or may not give): growth still keeps every record.
        let mut slots = Slots::with_capacity(1);
        let n = 3 * HUGE_PAGE / RECORD;
        for i in 0..n {
            let mut rec = Record::vacant();
            rec.park = i as u64;
            slots.push(rec);
        }
        assert!(slots.cap * RECORD >= 3 * HUGE_PAGE);
        assert_eq!(slots.as_ptr() as usize % 64, 0);
        assert!(slots.iter().enumerate().all(|(i, r)| r.park == i as u64));
    }
}
