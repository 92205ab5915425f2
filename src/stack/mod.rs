//! Fiber stacks: mmap'd, lazily committed, a guard page below each, pooled.
//!
//! A stack is one anonymous private mapping: a guard page at the bottom and
//! the usable stack above it. Nothing is committed until touched, so a fiber
//! that parks after a shallow call chain costs one or two resident pages.
//!
//! ## Guard pages without extra mappings
//!
//! An mprotect'd guard page splits the mapping in two, and the default
//! `vm.max_map_count` (65530) then caps a process near 32 000 stacks. Linux
//! 6.13 added `madvise(MADV_GUARD_INSTALL)`, which marks the page as a guard in
//! the page tables without touching the mapping; adjacent stacks then merge
//! into a single VMA (100 000 stacks showed up as one line of
//! `/proc/self/maps` on this project's machines). We use it when the kernel
//! has it and fall back to mprotect otherwise.
//!
//! ## Transparent huge pages
//!
//! A 2 MiB huge page behind a fiber stack would multiply its footprint by a
//! few hundred. `MAP_STACK` keeps THP off on Linux ≥ 6.7; on the fallback path
//! (older kernels) we also say `MADV_NOHUGEPAGE`.
//!
//! ## Mapping in chunks
//!
//! Stacks are mapped [`CHUNK`](pool::CHUNK) at a time, more once a thread
//! has mapped many (up to 512 at a time, for a burst of spawns): one `mmap`
//! for the lot and one `process_madvise` installing all their guards, where the
//! kernel allows it (per-stack `madvise`, then mprotect, otherwise). Each
//! stack of a chunk is still its own range, unmapped on its own when it is
//! dropped.
//!
//! ## The pool
//!
//! Free stacks go back to a per-thread pool (`pool.rs`), in tiers that
//! bound the memory it keeps. In front of the pool, each runtime keeps up
//! to 16 free stacks of its default size for itself, with their memory
//! ([`Spare`]): spawning then needs no thread-local, `RefCell` or search by
//! size.

pub(crate) mod overflow;
pub(crate) mod pin;
mod pool;
mod spare;
mod unmap;

pub(crate) use crate::mem::page_size;
pub(crate) use pool::{give_back, release_pending, release_stale_pending, take};
pub(crate) use spare::Spare;

use std::io;
use std::ptr::{self, NonNull};

/// The stack size a fiber gets unless told otherwise: 256 KiB.
///
/// Only the pages a fiber touches are committed, so this is address space,
/// not memory. Ordinary Rust code wants more than Go's starting 8 KiB: a
/// `format!` chain is a few KiB deep, a `tracing` subscriber adds a few more,
/// a 16 KiB buffer on the stack is common in I/O code, and debug builds use
/// several times the stack of release builds. 256 KiB leaves more than ten
/// times that headroom in debug builds while a million fibers still fit in
/// 256 GiB of the 128 TiB user address space.
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

/// The largest stack a fiber may ask for. Anything bigger is almost certainly
/// a unit mistake; a thread is the right tool for such depths.
pub const MAX_STACK_SIZE: usize = 1 << 30;

/// The smallest usable stack: the fiber's start data, the first switch frame
/// and a few frames of its own.
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// What a stack knows about its fiber, for the overflow report. It lives at
/// the top of the stack's own mapping, so its address is stable for as long
/// as the fiber runs, and the signal handler can read it without a lock.
#[repr(C)]
pub(crate) struct StackHeader {
    pub(crate) guard_lo: usize,
    pub(crate) guard_hi: usize,
    pub(crate) usable: usize,
    pub(crate) fiber_id: u64,
    /// A `str` owned by the fiber's record, which outlives the fiber's run.
    pub(crate) name_ptr: *const u8,
    pub(crate) name_len: usize,
    /// How many live frames on this stack hold the runtime entered on the
    /// thread (see [`pin`]); touched only by code running on this stack.
    pub(crate) pins: std::cell::Cell<u32>,
}

impl StackHeader {
    /// The header of `stack` while fiber `fiber_id` (named `name`, a `str`
    /// its record owns) runs on it.
    #[inline(always)]
    pub(crate) fn new(stack: &Stack, fiber_id: u64, name: Option<&str>) -> StackHeader {
        let (guard_lo, guard_hi) = stack.guard();
        let (name_ptr, name_len) = name.map_or((std::ptr::null(), 0), |n| (n.as_ptr(), n.len()));
        StackHeader {
            guard_lo,
            guard_hi,
            usable: stack.usable(),
            fiber_id,
            name_ptr,
            name_len,
            pins: std::cell::Cell::new(0),
        }
    }
}

/// One mapped fiber stack: a guard page at `base`, the usable stack above it.
///
/// # Invariant
///
/// `base..base + len` is a mapping owned by this value and unmapped on drop;
/// the first `page_size()` bytes are the guard.
pub(crate) struct Stack {
    pub(super) base: NonNull<u8>,
    pub(super) len: usize,
}

impl Stack {
    /// Maps `count` adjacent stacks with `usable` bytes each (validated and
    /// page-rounded), each above a guard page.
    pub(super) fn map_chunk(usable: usize, count: usize) -> io::Result<Vec<Stack>> {
        let guard = page_size();
        let len = usable + guard;
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing aliases nothing; the result is checked below.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len * count,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let err = io::Error::last_os_error();
            return Err(io::Error::new(
                err.kind(),
                format!(
                    "cannot map fiber stacks of {} KiB: {err} (the process may have reached \
                     vm.max_map_count = {} mappings, or its address-space limit)",
                    usable / 1024,
                    max_map_count().map_or_else(|| "?".to_string(), |n| n.to_string()),
                ),
            ));
        }
        let stacks: Vec<Stack> = (0..count)
            .map(|i| Stack {
                base: NonNull::new(base.cast::<u8>().wrapping_add(i * len))
                    .expect("mmap returned null"),
                len,
            })
            .collect();
        advice::install_guards(&stacks)?;
        for stack in &stacks {
            crate::arch::stack_mapped(stack.guard().1, stack.top() as usize);
        }
        Ok(stacks)
    }

    /// The start of the mapping (the guard page).
    pub(crate) fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// The usable size in bytes (the guard page excluded).
    #[inline]
    pub(crate) fn usable(&self) -> usize {
        self.len - page_size()
    }

    /// One past the highest usable byte; page-aligned.
    #[inline]
    pub(crate) fn top(&self) -> *mut u8 {
        self.base.as_ptr().wrapping_add(self.len)
    }

    /// The address range of the guard page.
    #[inline]
    pub(crate) fn guard(&self) -> (usize, usize) {
        let lo = self.base.as_ptr() as usize;
        (lo, lo + page_size())
    }

    /// The header slot at the top of the stack.
    #[inline]
    pub(crate) fn header(&self) -> *mut StackHeader {
        self.top()
            .wrapping_sub(size_of::<StackHeader>().next_multiple_of(16))
            .cast()
    }

    /// The 16-byte aligned address below the header where a fiber's own data
    /// may start.
    #[inline]
    pub(crate) fn below_header(&self) -> *mut u8 {
        self.header().cast()
    }
}

mod advice;
pub(crate) use advice::{populate_tops, populates};

impl Drop for Stack {
    fn drop(&mut self) {
        let lo = self.base.as_ptr() as usize;
        crate::arch::range_unmapped(lo, lo + self.len);
        // SAFETY: the invariant says we own this mapping, and no fiber runs
        // on it any more (a stack is dropped only after its fiber has ended
        // and switched away for good).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// Checks a requested stack size and rounds it up to whole pages.
pub(crate) fn validate_size(size: usize) -> io::Result<usize> {
    if size == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a fiber's stack size must be greater than zero",
        ));
    }
    if size > MAX_STACK_SIZE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a fiber stack of {size} bytes is larger than the limit of {} MiB",
                MAX_STACK_SIZE >> 20
            ),
        ));
    }
    Ok(size.max(MIN_STACK_SIZE).next_multiple_of(page_size()))
}

fn max_map_count() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Whether this kernel populates through `process_madvise` (6.13),
    /// asked directly, not through the code under test (a `populate_tops`
    /// that did nothing would otherwise pass as "unsupported").
    pub(crate) fn kernel_populates() -> bool {
        let page = page_size();
        let stacks = Stack::map_chunk(validate_size(MIN_STACK_SIZE).unwrap(), 1).unwrap();
        let top = stacks[0].top().wrapping_sub(page);
        // SAFETY: pidfd_open of our own pid; checked below.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) } as i32;
        assert!(pidfd >= 0, "pidfd_open: {}", io::Error::last_os_error());
        let iov = libc::iovec {
            iov_base: top.cast(),
            iov_len: page,
        };
        // SAFETY: one valid iovec naming the top page of a stack we just
        // mapped; MADV_POPULATE_WRITE (23) leaves its contents as they are.
        let done =
            unsafe { libc::syscall(libc::SYS_process_madvise, pidfd, &raw const iov, 1, 23, 0) };
        // SAFETY: our own fd, closed once.
        unsafe { libc::close(pidfd) };
        done == page as libc::c_long && resident(top)
    }

    /// Whether the page at `addr` is resident (`mincore`): for the tests of
    /// the stack layer's advice to the kernel, and of the scheduler's use of
    /// it.
    pub(crate) fn resident(addr: *mut u8) -> bool {
        let page = page_size();
        let mut vec = 0u8;
        // SAFETY: `addr` rounded down to its page lies in a mapping of
        // the calling test's (a stack, or pages it mapped); `vec` has room
        // for that one page's byte.
        let rc = unsafe {
            libc::mincore(
                (addr as usize & !(page - 1)) as *mut libc::c_void,
                page,
                &raw mut vec,
            )
        };
        assert_eq!(rc, 0, "mincore: {}", io::Error::last_os_error());
        vec & 1 == 1
    }

    #[test]
    fn sizes_are_validated_and_rounded() {
        assert_eq!(
            validate_size(0).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert!(validate_size(MAX_STACK_SIZE + 1).is_err());
        assert_eq!(validate_size(1).unwrap(), MIN_STACK_SIZE);
        assert_eq!(validate_size(MIN_STACK_SIZE + 1).unwrap() % page_size(), 0);
    }

    #[test]
    fn chunks_install_a_guard_below_every_stack() {
        let stacks = Stack::map_chunk(validate_size(MIN_STACK_SIZE).unwrap(), 4).unwrap();
        for pair in stacks.windows(2) {
            assert_eq!(pair[0].top(), pair[1].base(), "stacks are adjacent");
        }
    }

    #[test]
    fn usable_memory_is_writable_and_guard_is_below() {
        let stack = take(validate_size(64 * 1024).unwrap()).unwrap();
        let (lo, hi) = stack.guard();
        assert_eq!(hi - lo, page_size());
        assert_eq!(stack.top() as usize - hi, stack.usable());
        // SAFETY: the usable range is ours to write.
        unsafe { ptr::write_bytes(hi as *mut u8, 0xA5, stack.usable()) };
    }
}
