//! A runtime's own few free stacks of its default size, in front of the
//! thread's pool: spawning and reaping a fiber touch only this short list,
//! already in hand, instead of a thread-local, a `RefCell` and a search by
//! size (Go keeps a per-P free list of goroutines before its global one for
//! the same reason).
//!
//! It holds at most [`SPARE_CAPACITY`] stacks with their memory, on top of
//! the pool's warm tier; what does not fit, and every stack of another size,
//! goes to the pool, and so does the whole list when the runtime is dropped.
//! (The pool itself stays per thread, so that runtimes made one after
//! another on a thread, `fibra::run` in a loop, reuse each other's stacks.)

use std::io;

use super::Stack;

/// How many free stacks a runtime keeps for itself.
pub(crate) const SPARE_CAPACITY: usize = 16;

/// Free stacks of one size, most recently used last.
pub(crate) struct Spare {
    usable: usize,
    stacks: Vec<Stack>,
}

impl Spare {
    /// An empty list for stacks of `usable` bytes (a validated size).
    pub(crate) fn new(usable: usize) -> Spare {
        Spare {
            usable,
            stacks: Vec::with_capacity(SPARE_CAPACITY),
        }
    }

    /// A stack of `usable` bytes: the most recently freed one of the list,
    /// or one from the thread's pool.
    #[inline]
    pub(crate) fn take(&mut self, usable: usize) -> io::Result<Stack> {
        if usable == self.usable
            && let Some(stack) = self.stacks.pop()
        {
            return Ok(stack);
        }
        super::take(usable)
    }

    /// Keeps a stack whose fiber has ended, or hands it to the pool.
    #[inline]
    pub(crate) fn give_back(&mut self, stack: Stack) {
        if stack.usable() == self.usable && self.stacks.len() < SPARE_CAPACITY {
            self.stacks.push(stack);
        } else {
            super::give_back(stack);
        }
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        self.stacks.drain(..).for_each(super::give_back);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::DEFAULT_STACK_SIZE;

    #[test]
    fn reuses_its_own_stacks_last_in_first_out() {
        let mut spare = Spare::new(DEFAULT_STACK_SIZE);
        let a = spare.take(DEFAULT_STACK_SIZE).unwrap();
        let b = spare.take(DEFAULT_STACK_SIZE).unwrap();
        let (a_base, b_base) = (a.base(), b.base());
        spare.give_back(a);
        spare.give_back(b);
        assert_eq!(spare.take(DEFAULT_STACK_SIZE).unwrap().base(), b_base);
        assert_eq!(spare.stacks.len(), 1);
        assert_eq!(spare.stacks[0].base(), a_base);
    }

    #[test]
    fn other_sizes_and_overflow_go_to_the_pool() {
        let mut spare = Spare::new(DEFAULT_STACK_SIZE);
        let small = spare.take(64 * 1024).unwrap();
        assert_eq!(small.usable(), 64 * 1024);
        spare.give_back(small);
        assert!(spare.stacks.is_empty());
        let many: Vec<Stack> = (0..SPARE_CAPACITY + 3)
            .map(|_| spare.take(DEFAULT_STACK_SIZE).unwrap())
            .collect();
        many.into_iter().for_each(|s| spare.give_back(s));
        assert_eq!(spare.stacks.len(), SPARE_CAPACITY);
    }
}
