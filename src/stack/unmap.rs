//! Giving stacks back to the kernel: one `munmap` per run of adjacent
//! stacks.

use super::Stack;

/// Unmaps stacks, one `munmap` per run of adjacent ones: the stacks of a
/// chunk are adjacent, and unmapping them one by one would split a VMA
/// each time (a million fibers ending took seconds that way).
pub(super) fn unmap(stacks: Vec<Stack>) {
    if stacks.is_empty() {
        return;
    }
    let ranges: Vec<(usize, usize)> = stacks
        .into_iter()
        .map(|stack| {
            let range = (stack.base.as_ptr() as usize, stack.len);
            std::mem::forget(stack); // unmapped below, as part of its run
            range
        })
        .collect();
    for (start, len) in runs(ranges) {
        crate::arch::range_unmapped(start, start + len);
        // SAFETY: each run is made of whole stacks we owned and have
        // forgotten; no fiber runs on them.
        unsafe { libc::munmap(start as *mut libc::c_void, len) };
    }
}

/// Merges `(start, len)` ranges into runs of adjacent ones, sorted.
fn runs(mut ranges: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    ranges.sort_unstable();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (base, len) in ranges {
        match runs.last_mut() {
            Some((start, run_len)) if *start + *run_len == base => *run_len += len,
            _ => runs.push((base, len)),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::{MIN_STACK_SIZE, validate_size};

    #[test]
    fn unmapping_coalesces_adjacent_stacks_in_any_order() {
        let ranges = vec![(500, 100), (100, 100), (200, 100), (700, 50), (400, 100)];
        assert_eq!(runs(ranges), vec![(100, 200), (400, 200), (700, 50)]);
        // And the real thing: a chunk with a hole, unmapped out of order.
        let mut stacks = Stack::map_chunk(validate_size(MIN_STACK_SIZE).unwrap(), 6).unwrap();
        let kept = stacks.remove(2);
        stacks.reverse();
        unmap(stacks);
        // SAFETY: the kept stack's usable memory is still ours.
        unsafe { kept.top().sub(1).write(7) };
    }
}
