//! [`MappedArray`]: a `Vec` in all but how it grows, in a mapping of its
//! own.
//!
//! Fiber records are aligned to a cache line (see
//! `scheduler/core/record.rs`), and the global allocator cannot grow an
//! allocation of that alignment in place: std's `realloc` for it allocates
//! anew, copies and frees, where glibc's grows a large block of ordinary
//! alignment with `mremap`. For a burst of a million fibers a `Vec` of
//! records copied every record again at each doubling, and faulted in the
//! pages of each copy: 36 000 page faults more in `million-child fibra`
//! (1 116 000 against 1 080 000). So the records, and the timer wheel's
//! entries, live in a private anonymous mapping of their own, page-aligned,
//! which `mremap` grows without copying or touching a page, and which asks
//! for transparent huge pages once it can hold one (see
//! [`MappedArray::advise_huge`]).

use std::alloc::Layout;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};

/// The size of an x86_64 transparent huge page.
const HUGE_PAGE: usize = 2 << 20;

/// A growable array in a mapping of its own.
///
/// # Invariant
///
/// When `bytes` is 0 there is no mapping, `ptr` is dangling (but aligned)
/// and `len` is 0. Otherwise `ptr` is the start of a private anonymous
/// read-write mapping of `bytes` bytes (a whole number of pages), owned by
/// this value, which holds [`MappedArray::cap`] values; its first `len`
/// are initialised.
pub(crate) struct MappedArray<T> {
    ptr: NonNull<T>,
    len: usize,
    bytes: usize,
    _owns: PhantomData<T>,
}

impl<T> MappedArray<T> {
    /// A mapping is page-aligned: enough for any `T` of at most a page's
    /// alignment; zero-sized values would need no mapping at all.
    const FITS: () = assert!(
        size_of::<T>() > 0 && align_of::<T>() <= 4096,
        "MappedArray: a zero-sized or over-aligned type"
    );

    /// Where a debugger reads the start of the values and their count, in
    /// bytes from the array's address (`observe::debugger`).
    pub(crate) const PTR_AT: usize = std::mem::offset_of!(Self, ptr);
    pub(crate) const LEN_AT: usize = std::mem::offset_of!(Self, len);

    /// An empty array, with no mapping until the first push.
    pub(crate) const fn new() -> MappedArray<T> {
        #[allow(clippy::let_unit_value)]
        let () = Self::FITS;
        MappedArray {
            ptr: NonNull::dangling(),
            len: 0,
            bytes: 0,
            _owns: PhantomData,
        }
    }

    /// Room for at least `capacity` values (at least a page of them).
    pub(crate) fn with_capacity(capacity: usize) -> MappedArray<T> {
        let mut array = MappedArray::new();
        array.map(
            capacity
                .max(1)
                .checked_mul(size_of::<T>())
                .expect("fibra: an array too large to map"),
        );
        array
    }

    /// Appends `value`, growing the mapping if it is full.
    #[inline]
    pub(crate) fn push(&mut self, value: T) {
        if self.len == self.cap() {
            self.grow();
        }
        // SAFETY: `len < cap()`: the slot is inside the mapping, and not
        // initialised yet (nothing to drop).
        unsafe { self.ptr.as_ptr().add(self.len).write(value) };
        self.len += 1;
    }

    /// Doubles the mapping (or makes the first). It may move: like a
    /// `Vec`'s growth, this invalidates every reference into it (the borrow
    /// checker sees to that: `push` takes `&mut self`).
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let want = self
            .bytes
            .checked_mul(2)
            .expect("fibra: an array too large to map");
        self.map(want);
    }

    /// Maps (or remaps) the array to at least `want` bytes, rounded up to
    /// whole pages.
    fn map(&mut self, want: usize) {
        let bytes = want
            .max(1)
            .checked_next_multiple_of(super::page_size())
            .expect("fibra: an array too large to map");
        let p = if self.bytes == 0 {
            // SAFETY: a new private anonymous mapping, shared with nothing;
            // the result is checked.
            unsafe {
                libc::mmap(
                    ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            }
        } else {
            // SAFETY: `ptr` and `self.bytes` are our mapping (the
            // invariant); MREMAP_MAYMOVE may move it, and nothing refers
            // into it during this call (`&mut self`). The result is checked.
            unsafe {
                libc::mremap(
                    self.ptr.as_ptr().cast(),
                    self.bytes,
                    bytes,
                    libc::MREMAP_MAYMOVE,
                )
            }
        };
        self.ptr = mapped(p, bytes);
        self.bytes = bytes;
        self.advise_huge();
    }

    /// How many values the mapping holds: whole ones only, when their size
    /// does not divide a page (a division by a constant, a shift for
    /// records).
    #[inline(always)]
    fn cap(&self) -> usize {
        self.bytes / size_of::<T>()
    }

    /// Asks for transparent huge pages once the mapping is large enough to
    /// hold one: a burst of spawns then takes a page fault per 2 MiB of
    /// records (or timer entries) instead of one per 4 KiB. In a million
    /// fibers that is 31 000 faults fewer for the records
    /// (`million-child fibra`: 1 082 000 against 1 051 000): at the 2.4 us
    /// of system time a fault costs on the development VM, some 3% of the
    /// burst, less than that VM's swings let a time show. The kernel
    /// decides: without THP (`never`), or without a free huge page, the
    /// advice does nothing and the array gets ordinary pages. Where it
    /// compacts memory to make a huge page (`defrag` at `madvise`,
    /// Debian's default), the push that first touches a 2 MiB stretch may
    /// wait for that, once per stretch: the arrays are reused, and never
    /// shrink.
    fn advise_huge(&self) {
        if self.bytes >= HUGE_PAGE {
            // SAFETY: advice about our own mapping (see the invariant),
            // which neither moves nor changes its contents; a failure
            // (no THP in this kernel) leaves it as it was.
            unsafe { libc::madvise(self.ptr.as_ptr().cast(), self.bytes, libc::MADV_HUGEPAGE) };
        }
    }
}

/// The values of a mapping `mmap` or `mremap` returned, or the global
/// allocator's out-of-memory handling if it failed.
fn mapped<T>(p: *mut libc::c_void, bytes: usize) -> NonNull<T> {
    if p == libc::MAP_FAILED {
        let layout = Layout::from_size_align(bytes, 4096).unwrap_or(Layout::new::<T>());
        std::alloc::handle_alloc_error(layout);
    }
    // A mapping is page-aligned, so aligned for `T` (see `FITS`).
    NonNull::new(p.cast()).unwrap_or_else(|| std::alloc::handle_alloc_error(Layout::new::<T>()))
}

impl<T> Deref for MappedArray<T> {
    type Target = [T];

    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: the first `len` values are initialised (the invariant;
        // with no mapping, `len` is 0 and `ptr` aligned and non-null), and
        // borrowed with `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> DerefMut for MappedArray<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as for `deref`, borrowed mutably with `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for MappedArray<T> {
    fn drop(&mut self) {
        /// Unmaps the array when dropped: after its values, and also if
        /// the drop of one of them unwinds.
        struct Unmap(*mut libc::c_void, usize);
        impl Drop for Unmap {
            fn drop(&mut self) {
                if self.1 != 0 {
                    // SAFETY: the mapping is ours alone (the invariant)
                    // and, its values dropped, is never used again.
                    unsafe { libc::munmap(self.0, self.1) };
                }
            }
        }
        let _unmap = Unmap(self.ptr.as_ptr().cast(), self.bytes);
        // SAFETY: the first `len` values are initialised and dropped once,
        // here (a slice's drop goes on past a value's drop that unwinds);
        // the mapping stays until `_unmap` goes.
        unsafe { ptr::drop_in_place(ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn grows_from_nothing_keeping_its_values_and_drops_them() {
        let name: Arc<str> = "kept".into();
        let mut array = MappedArray::new();
        assert!(array.is_empty());
        for i in 0..5000u64 {
            array.push((i, name.clone()));
        }
        assert!(array.iter().enumerate().all(|(i, v)| v.0 == i as u64));
        assert_eq!(Arc::strong_count(&name), 1 + array.len());
        drop(array);
        assert_eq!(Arc::strong_count(&name), 1, "every value dropped");
        drop(MappedArray::<u8>::new()); // nothing mapped, nothing to unmap
    }

    #[test]
    fn keeps_line_aligned_values_across_growth_into_huge_pages() {
        #[repr(align(64))]
        struct Line(u64);
        // Past 2 MiB, where the mapping is advised to use huge pages (which
        // the kernel may or may not give): growth still keeps every value.
        let mut array = MappedArray::with_capacity(1);
        let first_cap = array.cap();
        assert!(first_cap >= 1);
        let n = 3 * HUGE_PAGE / size_of::<Line>();
        for i in 0..n {
            array.push(Line(i as u64));
        }
        assert!(array.cap() > first_cap && array.bytes >= 3 * HUGE_PAGE);
        assert_eq!(array.as_ptr() as usize % 64, 0, "values stay aligned");
        assert!(array.iter().enumerate().all(|(i, l)| l.0 == i as u64));
    }

    #[test]
    fn holds_values_whose_size_does_not_divide_a_page() {
        let mut array = MappedArray::new();
        for i in 0..1000u32 {
            array.push([i; 5]); // 20 bytes
        }
        assert!(array.cap() * 20 <= array.bytes);
        assert!(array.iter().enumerate().all(|(i, v)| *v == [i as u32; 5]));
    }
}
