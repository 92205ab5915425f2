//! The FIFO of ready contexts: a ring of fiber keys.
//!
//! `VecDeque` would do, but this queue sits on the hottest path of the
//! runtime (every yield pushes one key and pops another), and a ring whose
//! capacity is a power of two wraps its indices with one `and` instead of
//! `VecDeque`'s compare-and-subtract on both ends, and a masked index needs
//! no bounds check. It only grows: a runtime's peak of ready fibers is a
//! good guess for its next one.

use crate::reactor::token::Key;

pub(crate) struct RunQueue {
    /// `slots.len()` is a power of two; the queue is `len` keys from `head`,
    /// wrapping around the end.
    slots: Box<[Key]>,
    /// `slots.len() - 1`: an index masked with it is in bounds.
    mask: usize,
    head: usize,
    len: usize,
}

impl RunQueue {
    /// An empty queue with room for `capacity` keys before it grows.
    pub(crate) fn with_capacity(capacity: usize) -> RunQueue {
        let slots = vec![0; capacity.max(1).next_power_of_two()].into_boxed_slice();
        RunQueue {
            mask: slots.len() - 1,
            slots,
            head: 0,
            len: 0,
        }
    }

    /// The index of the slot `i` places after the head, wrapping around:
    /// always in bounds, since `slots.len()` is the power of two `mask + 1`
    /// (the two are set together in `with_capacity` and `grow`).
    #[inline(always)]
    fn index(&self, i: usize) -> usize {
        let at = (self.head + i) & self.mask;
        debug_assert!(at < self.slots.len());
        at
    }

    /// The key in the slot `i` places after the head.
    #[inline(always)]
    fn get(&self, i: usize) -> Key {
        // SAFETY: `index` is in bounds (see there).
        unsafe { *self.slots.get_unchecked(self.index(i)) }
    }

    /// Stores `key` in the slot `i` places after the head.
    #[inline(always)]
    fn set(&mut self, i: usize, key: Key) {
        let at = self.index(i);
        // SAFETY: `index` is in bounds (see there).
        unsafe { *self.slots.get_unchecked_mut(at) = key };
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub(crate) fn push_back(&mut self, key: Key) {
        if self.len > self.mask {
            self.grow();
        }
        self.set(self.len, key);
        self.len += 1;
    }

    /// The key [`RunQueue::pop_front`] would return, left in place.
    #[inline]
    pub(crate) fn front(&self) -> Option<Key> {
        (self.len != 0).then(|| self.get(0))
    }

    /// The key after [`RunQueue::front`], left in place.
    #[inline]
    pub(crate) fn second(&self) -> Option<Key> {
        (self.len > 1).then(|| self.get(1))
    }

    /// The key `i` places after [`RunQueue::front`], left in place.
    #[inline]
    pub(crate) fn nth(&self, i: usize) -> Option<Key> {
        (self.len > i).then(|| self.get(i))
    }

    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<Key> {
        if self.len == 0 {
            return None;
        }
        let key = self.get(0);
        self.head = (self.head + 1) & self.mask;
        self.len -= 1;
        Some(key)
    }

    /// Removes the last `key` in the queue, the others keeping their order;
    /// whether there was one. Walks from the back: for a key pushed a
    /// moment ago (an idle fiber just spawned), off the hot paths.
    pub(crate) fn remove(&mut self, key: Key) -> bool {
        let Some(at) = (0..self.len).rev().find(|&i| self.get(i) == key) else {
            return false;
        };
        for i in at..self.len - 1 {
            let next = self.get(i + 1);
            self.set(i, next);
        }
        self.len -= 1;
        true
    }

    /// Doubles the capacity, unwrapping the queue to start at slot 0.
    #[cold]
    fn grow(&mut self) {
        let mut slots = vec![0; self.slots.len() * 2].into_boxed_slice();
        for (i, slot) in slots.iter_mut().take(self.len).enumerate() {
            *slot = self.get(i);
        }
        self.mask = slots.len() - 1;
        self.slots = slots;
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::RunQueue;
    use std::collections::VecDeque;

    #[test]
    fn fifo_across_wraps_and_growth() {
        // Compare with VecDeque over a mix of pushes and pops that wraps the
        // ring many times and grows it while it is wrapped.
        let mut q = RunQueue::with_capacity(2);
        let mut model = VecDeque::new();
        let mut next = 0u32;
        for round in 0..500u32 {
            for _ in 0..(round % 7) {
                q.push_back(next);
                model.push_back(next);
                next += 1;
            }
            for _ in 0..(round % 5) {
                assert_eq!(q.pop_front(), model.pop_front());
            }
            assert_eq!(q.front(), model.front().copied());
            assert_eq!(q.len(), model.len());
            assert_eq!(q.is_empty(), model.is_empty());
        }
        while let Some(k) = model.pop_front() {
            assert_eq!(q.pop_front(), Some(k));
        }
        assert_eq!(q.pop_front(), None);
    }

    #[test]
    fn remove_takes_the_last_one_and_keeps_the_order() {
        let mut q = RunQueue::with_capacity(4);
        // Wrapped: the head is past the start of the ring.
        for k in [9, 9, 1, 2, 3] {
            q.push_back(k);
        }
        q.pop_front();
        q.pop_front();
        for k in [2, 4] {
            q.push_back(k);
        }
        assert!(q.remove(2));
        assert!(!q.remove(7));
        let mut left = Vec::new();
        while let Some(k) = q.pop_front() {
            left.push(k);
        }
        assert_eq!(left, [1, 2, 3, 4]);
    }
}
