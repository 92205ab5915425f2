//! The per-thread pool of free stacks.
//!
//! Spawning must not cost a syscall, so stacks go back to a per-thread pool
//! when their fiber ends, in three tiers, reused in this order:
//!
//! - up to [`WARM_CAPACITY`] *warm* stacks, reused last-in-first-out as they
//!   are (the most recent is the one in cache);
//! - up to [`PENDING_CAPACITY`] *pending* stacks: still holding their memory
//!   (they were in use moments ago, so this never exceeds the recent peak),
//!   until [`release_pending`] marks it free, [`RELEASE_BATCH`] stacks at a
//!   time. That happens when the runtime is about to sleep with no timer due
//!   for 5 ms, when an outer loop takes the thread back from `turn`, when
//!   the list is full, and on a runtime that never goes idle once the
//!   backlog has waited [`PENDING_MAX_AGE_NS`] since a poll first saw it
//!   (then a batch every [`RELEASE_GAP_NS`] until none is left); one
//!   `process_madvise(MADV_FREE)` covers 512 stacks. A storm of fibers that
//!   end and start again meanwhile costs no syscall (releasing after every
//!   1 024 stacks made a storm of sleepers 40% slower, and a cap of 65 536
//!   pending stacks 25% slower with 100 000 sleepers), and no release stalls
//!   the runtime for more than one batch (a few milliseconds);
//! - up to [`COLD_CAPACITY`] *cold* stacks, whose memory is marked free: the
//!   kernel reclaims it when it needs memory, and a stack reused before that
//!   does not even fault. Past that a stack is unmapped (which splits a VMA
//!   and costs more).
//!
//! So, however many fibers came and went, a pool holds memory the kernel
//! cannot take back for at most `WARM_CAPACITY` stacks, plus, for about a
//! second at most, the stacks of fibers that just ended, plus one page for
//! each stack of a burst's newest chunk that no fiber has used yet: [`take`]
//! faults in the top pages of a chunk mapped in a burst, and maps a chunk
//! only when the pool is empty, so those are the stacks of one chunk (at
//! most 512 pages, 2 MiB) per thread and stack size.

use std::cell::RefCell;
use std::io;

use super::unmap::unmap;
use super::{Stack, advice};

/// How many free stacks a thread keeps with their memory, for reuse.
pub(crate) const WARM_CAPACITY: usize = 64;

/// How many free stacks wait, with their memory, for a batched release.
/// Never more than the recent peak of live fibers, so the cap only bounds
/// the list itself (16 bytes a stack).
pub(crate) const PENDING_CAPACITY: usize = 1 << 20;

/// The most pending stacks one release marks free: `MADV_FREE` costs about
/// 0.7 µs a stack that was used, so a release stalls the runtime for a
/// couple of milliseconds at most, however many fibers just ended.
pub(crate) const RELEASE_BATCH: usize = 2048;

/// On a runtime that never goes idle, the time between two batches of a
/// stale release (at most 15% of the thread while a backlog drains).
pub(crate) const RELEASE_GAP_NS: u64 = 10_000_000;

/// The longest a pending stack keeps its memory on a runtime that never
/// goes idle.
pub(crate) const PENDING_MAX_AGE_NS: u64 = 1_000_000_000;

/// How many more free stacks a thread keeps with their memory marked free:
/// address space and about 512 bytes of page tables each.
pub(crate) const COLD_CAPACITY: usize = 1 << 17;

/// How many stacks one mapping holds at first (fewer for large stacks).
pub(crate) const CHUNK: usize = 32;

/// How many chunks of one size a thread maps before its chunks double, up
/// to [`MAX_CHUNK_DOUBLINGS`] times: a burst of a million spawns then maps
/// its stacks 512 at a time, one `mmap` and one guard install each, where
/// 32 at a time made the `mmap`s alone a twentieth of the burst.
const CHUNKS_PER_DOUBLING: u32 = 8;
const MAX_CHUNK_DOUBLINGS: u32 = 4;

/// The number of stacks of `usable` bytes in the next chunk of a thread
/// that has mapped `mapped` chunks of that size: [`CHUNK`], doubling every
/// [`CHUNKS_PER_DOUBLING`] chunks, and never more than 16 MiB of address
/// space per chunk before doubling (so at most 256 MiB after).
fn chunk_len(usable: usize, mapped: u32) -> usize {
    let doublings = (mapped / CHUNKS_PER_DOUBLING).min(MAX_CHUNK_DOUBLINGS);
    (CHUNK << doublings)
        .min(((16 << 20) << doublings) / usable)
        .max(1)
}

/// The free stacks of one size.
struct Pool {
    usable: usize,
    /// With their memory, most recently used last.
    warm: Vec<Stack>,
    /// With their memory, waiting for a batched release.
    pending: Vec<Stack>,
    /// Memory marked free (or never touched).
    cold: Vec<Stack>,
    /// Chunks of this size mapped so far (see [`chunk_len`]).
    chunks: u32,
}

impl Pool {
    fn new(usable: usize) -> Pool {
        Pool {
            usable,
            warm: Vec::new(),
            pending: Vec::new(),
            cold: Vec::new(),
            chunks: 0,
        }
    }

    /// Marks the memory of up to [`RELEASE_BATCH`] pending stacks free and
    /// moves them to the cold tier; returns the stacks that did not fit
    /// there, to [`unmap`](super::unmap::unmap).
    fn release_pending(&mut self) -> Vec<Stack> {
        if self.pending.is_empty() {
            return Vec::new();
        }
        // The most recent ones: a split at the end moves nothing else.
        let mut batch = self
            .pending
            .split_off(self.pending.len().saturating_sub(RELEASE_BATCH));
        advice::free_memory(&batch);
        let room = COLD_CAPACITY.saturating_sub(self.cold.len());
        let excess = batch.len().saturating_sub(room);
        let unmap = batch.split_off(batch.len() - excess);
        self.cold.append(&mut batch);
        unmap
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let mut all = std::mem::take(&mut self.warm);
        all.append(&mut self.pending);
        all.append(&mut self.cold);
        unmap(all);
    }
}

thread_local! {
    /// This thread's free stacks, by size (there are rarely more than two).
    static POOLS: RefCell<Vec<Pool>> = const { RefCell::new(Vec::new()) };
}

/// A stack with `usable` bytes (validated by [`validate_size`]), from this
/// thread's pool when one of that size is free; else from a new chunk. Its
/// pages are left to the fiber, or to `populate_tops` right before a
/// burst's fibers run.
pub(crate) fn take(usable: usize) -> io::Result<Stack> {
    // A free stack, or how many chunks of this size were mapped before.
    let pooled = POOLS.try_with(|pools| {
        let mut pools = pools.borrow_mut();
        let Some(pool) = pools.iter_mut().find(|p| p.usable == usable) else {
            return Err(0);
        };
        pool.warm
            .pop()
            .or_else(|| pool.pending.pop())
            .or_else(|| pool.cold.pop())
            .ok_or(pool.chunks)
    });
    let count = match pooled {
        Ok(Ok(stack)) => return Ok(stack),
        Ok(Err(mapped)) => chunk_len(usable, mapped),
        // The thread is exiting: there is no pool to keep the rest in.
        Err(_) => 1,
    };
    let mut fresh = Stack::map_chunk(usable, count)?;
    let stack = fresh.pop().expect("a chunk has at least one stack");
    let _ = POOLS.try_with(|pools| {
        let mut pools = pools.borrow_mut();
        let pool = match pools.iter().position(|p| p.usable == usable) {
            Some(i) => &mut pools[i],
            None => {
                pools.push(Pool::new(usable));
                pools.last_mut().expect("just pushed")
            }
        };
        pool.cold.append(&mut fresh);
        pool.chunks = pool.chunks.saturating_add(1);
    });
    Ok(stack)
}

/// Returns a stack whose fiber has ended to this thread's pool (see the
/// module docs for the tiers).
pub(crate) fn give_back(stack: Stack) {
    let to_unmap = POOLS.try_with(|pools| {
        let mut pools = pools.borrow_mut();
        let usable = stack.usable();
        let i = match pools.iter().position(|p| p.usable == usable) {
            Some(i) => i,
            None => {
                pools.push(Pool::new(usable));
                pools.len() - 1
            }
        };
        let pool = &mut pools[i];
        if pool.warm.len() < WARM_CAPACITY {
            pool.warm.push(stack);
            Vec::new()
        } else {
            pool.pending.push(stack);
            MAYBE_PENDING.set(true);
            if pool.pending.len() >= PENDING_CAPACITY {
                pool.release_pending()
            } else {
                Vec::new()
            }
        }
    });
    // Outside the closure, so that munmap runs with the pool unborrowed.
    if let Ok(stacks) = to_unmap
        && !stacks.is_empty()
    {
        unmap(stacks);
    }
}

thread_local! {
    /// When this thread's backlog of pending stacks was first seen, or last
    /// released in part (ns); 0 while it has none.
    static LAST_RELEASE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// False only when this thread holds no pending stack: set when one is
    /// queued, cleared by a look that finds none. One load, on the path of
    /// every poll, instead of a walk of the pools (their heap block is one
    /// more cache line and page a turn touches for nothing).
    static MAYBE_PENDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Releases a batch of pending stacks once the backlog has waited
/// [`PENDING_MAX_AGE_NS`] since it was first seen here, and another every
/// [`RELEASE_GAP_NS`] while some are left. `now` reads the monotonic clock
/// (ns), and only when there is a backlog: this runs after every poll.
#[inline]
pub(crate) fn release_stale_pending(now: impl FnOnce() -> u64) {
    if MAYBE_PENDING.get() {
        release_stale_pending_slow(now());
    }
}

#[inline(never)]
fn release_stale_pending_slow(now: u64) {
    if !has_pending() {
        MAYBE_PENDING.set(false);
        let _ = LAST_RELEASE.try_with(|l| l.set(0));
        return;
    }
    let now = now.max(1);
    let last = LAST_RELEASE.try_with(std::cell::Cell::get).unwrap_or(0);
    if last == 0 {
        // A new backlog: it ages from here.
        let _ = LAST_RELEASE.try_with(|l| l.set(now));
    } else if now.saturating_sub(last) >= PENDING_MAX_AGE_NS {
        let left = release_pending();
        // With a backlog left, date this release so that the next one
        // comes RELEASE_GAP_NS from now instead of a whole age later.
        let dated = if left {
            now.saturating_sub(PENDING_MAX_AGE_NS - RELEASE_GAP_NS)
                .max(1)
        } else {
            0
        };
        let _ = LAST_RELEASE.try_with(|l| l.set(dated));
    }
}

/// Whether this thread holds pending stacks (a few loads).
fn has_pending() -> bool {
    POOLS
        .try_with(|pools| pools.borrow().iter().any(|p| !p.pending.is_empty()))
        .unwrap_or(false)
}

/// Releases the memory of up to [`RELEASE_BATCH`] of this thread's pending
/// stacks of each size (see the module docs); returns whether any are left.
/// Cheap when there are none.
#[inline]
pub(crate) fn release_pending() -> bool {
    MAYBE_PENDING.get() && release_pending_slow()
}

#[inline(never)]
fn release_pending_slow() -> bool {
    let released = POOLS.try_with(|pools| {
        let mut pools = pools.borrow_mut();
        if pools.iter().all(|p| p.pending.is_empty()) {
            // Taken back by spawns since they were queued.
            return None;
        }
        let to_unmap: Vec<Stack> = pools.iter_mut().flat_map(|p| p.release_pending()).collect();
        Some((to_unmap, pools.iter().any(|p| !p.pending.is_empty())))
    });
    let left = match released {
        Ok(Some((to_unmap, left))) => {
            unmap(to_unmap);
            left
        }
        Ok(None) | Err(_) => false,
    };
    if !left {
        MAYBE_PENDING.set(false);
    }
    left
}

#[cfg(test)]
mod tests {
    use std::ptr;

    use super::*;
    use crate::stack::{DEFAULT_STACK_SIZE, MIN_STACK_SIZE, validate_size};

    #[test]
    fn chunks_grow_with_what_a_thread_maps_and_stay_bounded() {
        let usable = validate_size(DEFAULT_STACK_SIZE).unwrap();
        assert_eq!(chunk_len(usable, 0), CHUNK);
        assert_eq!(chunk_len(usable, CHUNKS_PER_DOUBLING - 1), CHUNK);
        assert_eq!(chunk_len(usable, CHUNKS_PER_DOUBLING), 2 * CHUNK);
        assert_eq!(chunk_len(usable, u32::MAX), 512);
        // Large stacks: 16 MiB of address space a chunk at first, 256 MiB
        // at most, and never less than one stack.
        assert_eq!(chunk_len(4 << 20, 0), 4);
        assert_eq!(chunk_len(4 << 20, u32::MAX), 64);
        assert_eq!(chunk_len(1 << 30, u32::MAX), 1);
    }

    fn pooled(usable: usize) -> (usize, usize, usize) {
        POOLS.with(|p| {
            p.borrow()
                .iter()
                .find(|p| p.usable == usable)
                .map_or((0, 0, 0), |p| (p.warm.len(), p.pending.len(), p.cold.len()))
        })
    }

    /// Kilobytes of this process's memory marked free (reclaimable).
    fn lazy_free_kb() -> u64 {
        std::fs::read_to_string("/proc/self/smaps_rollup")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("LazyFree:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    #[test]
    fn pool_reuses_and_keeps_a_bounded_amount_of_memory() {
        let size = validate_size(DEFAULT_STACK_SIZE).unwrap();
        let a = take(size).unwrap();
        let top = a.top();
        give_back(a);
        let b = take(size).unwrap();
        assert_eq!(b.top(), top, "the pool hands back the stack it was given");

        // Touch 16 KiB of each of many stacks, then free them all.
        let n = WARM_CAPACITY + 100;
        let many: Vec<Stack> = (0..n).map(|_| take(size).unwrap()).collect();
        for s in &many {
            // SAFETY: the top 16 KiB of the usable stack are ours to write.
            unsafe { ptr::write_bytes(s.top().sub(16 * 1024), 1, 16 * 1024) };
        }
        many.into_iter().for_each(give_back);
        let (warm, pending, _) = pooled(size);
        assert_eq!((warm, pending), (WARM_CAPACITY, 100));

        // Releasing marks the pending stacks' memory free.
        let before = lazy_free_kb();
        release_pending();
        let (warm, pending, cold) = pooled(size);
        assert_eq!((warm, pending), (WARM_CAPACITY, 0));
        assert!(cold >= 100);
        let freed = lazy_free_kb().saturating_sub(before);
        assert!(freed >= 100 * 16 * 3 / 4, "only {freed} KiB marked free");
        drop(b);
    }

    #[test]
    fn stale_pending_stacks_are_released() {
        let size = validate_size(MIN_STACK_SIZE).unwrap();
        let many: Vec<Stack> = (0..WARM_CAPACITY + 10)
            .map(|_| take(size).unwrap())
            .collect();
        many.into_iter().for_each(give_back);
        assert_eq!(pooled(size).1, 10);
        let now = crate::timer::clock::now_ns();
        release_stale_pending(|| now); // the first look starts the backlog's age
        assert_eq!(pooled(size).1, 10);
        release_stale_pending(|| now + PENDING_MAX_AGE_NS - 1); // too young
        assert_eq!(pooled(size).1, 10);
        release_stale_pending(|| now + PENDING_MAX_AGE_NS);
        assert_eq!(pooled(size).1, 0);
        // No backlog: the clock is not even read.
        release_stale_pending(|| unreachable!("read the clock with no backlog"));
        let more: Vec<Stack> = (0..10).map(|_| take(size).unwrap()).collect();
        // Take them from the cold tier and free them past the warm ones again.
        let warm: Vec<Stack> = (0..WARM_CAPACITY).map(|_| take(size).unwrap()).collect();
        warm.into_iter().for_each(give_back);
        more.into_iter().for_each(give_back);
        // A new backlog ages from when it is first seen, not from the last
        // release.
        let later = now + 5 * PENDING_MAX_AGE_NS;
        release_stale_pending(|| later);
        assert_eq!(pooled(size).1, 10);
        release_stale_pending(|| later + 1); // too soon
        assert_eq!(pooled(size).1, 10);
        release_stale_pending(|| later + PENDING_MAX_AGE_NS);
        assert_eq!(pooled(size).1, 0);
    }

    #[test]
    fn releases_go_in_bounded_batches() {
        let size = validate_size(MIN_STACK_SIZE).unwrap();
        let many: Vec<Stack> = (0..WARM_CAPACITY + RELEASE_BATCH + 10)
            .map(|_| take(size).unwrap())
            .collect();
        many.into_iter().for_each(give_back);
        assert_eq!(pooled(size).1, RELEASE_BATCH + 10);
        // One release marks one batch free and says more are left.
        assert!(release_pending());
        assert_eq!(pooled(size).1, 10);
        assert!(!release_pending());
        assert_eq!(pooled(size).1, 0);

        // On a busy runtime, a stale backlog drains a batch per gap.
        let many: Vec<Stack> = (0..WARM_CAPACITY + RELEASE_BATCH + 10)
            .map(|_| take(size).unwrap())
            .collect();
        many.into_iter().for_each(give_back);
        let seen = crate::timer::clock::now_ns();
        release_stale_pending(|| seen);
        assert_eq!(pooled(size).1, RELEASE_BATCH + 10);
        let now = seen + PENDING_MAX_AGE_NS;
        release_stale_pending(|| now);
        assert_eq!(pooled(size).1, 10);
        release_stale_pending(|| now + RELEASE_GAP_NS - 1); // too soon
        assert_eq!(pooled(size).1, 10);
        release_stale_pending(|| now + RELEASE_GAP_NS);
        assert_eq!(pooled(size).1, 0);
    }
}
