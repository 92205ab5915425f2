//! [`MappedSlab`]: the `slab` crate's slab (values at stable keys, vacant
//! keys reused last-freed first) on a [`MappedArray`], for the timer
//! wheel, whose entries number one per sleeping fiber (a burst of a million
//! sleepers took 16 000 page faults for them in the global allocator's
//! pages, and takes a few dozen in huge ones), and for the reactor's
//! sources, one per socket, aligned to a cache line (which the global
//! allocator grows by copying every source to a new block).

use std::ops::{Index, IndexMut};

use super::array::MappedArray;

enum Slot<T> {
    Occupied(T),
    /// Vacant; the next vacant key (the array's length for none).
    Vacant(usize),
}

/// Values at keys that stay theirs until removed.
pub(crate) struct MappedSlab<T> {
    slots: MappedArray<Slot<T>>,
    /// The last key freed: the next insert's (the array's length for none).
    next: usize,
    len: usize,
}

impl<T> MappedSlab<T> {
    /// The bytes a value takes in the slab: its own size where the vacant
    /// tag fits in a niche of the value (as it does for the reactor's
    /// sources, which assert it).
    pub(crate) const SLOT_SIZE: usize = size_of::<Slot<T>>();

    /// An empty slab, with no mapping until the first insert.
    pub(crate) const fn new() -> MappedSlab<T> {
        MappedSlab {
            slots: MappedArray::new(),
            next: 0,
            len: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The key the next [`MappedSlab::insert`] will return: for a value
    /// that must know its key before it is stored (the reactor names a
    /// source's epoll token after it, and registers before it stores).
    #[inline]
    pub(crate) fn vacant_key(&self) -> usize {
        self.next
    }

    /// Stores `value` and returns its key.
    pub(crate) fn insert(&mut self, value: T) -> usize {
        let key = self.next;
        if key == self.slots.len() {
            self.slots.push(Slot::Occupied(value));
            self.next = key + 1;
        } else {
            match std::mem::replace(&mut self.slots[key], Slot::Occupied(value)) {
                Slot::Vacant(next) => self.next = next,
                Slot::Occupied(_) => unreachable!("the free list names an occupied slot"),
            }
        }
        self.len += 1;
        key
    }

    /// The value at `key`, if there is one.
    #[inline]
    pub(crate) fn get(&self, key: usize) -> Option<&T> {
        match self.slots.get(key) {
            Some(Slot::Occupied(value)) => Some(value),
            _ => None,
        }
    }

    /// The value at `key`, if there is one, to change.
    #[inline]
    pub(crate) fn get_mut(&mut self, key: usize) -> Option<&mut T> {
        match self.slots.get_mut(key) {
            Some(Slot::Occupied(value)) => Some(value),
            _ => None,
        }
    }

    /// Removes and returns the value at `key`.
    ///
    /// # Panics
    ///
    /// If there is none.
    pub(crate) fn remove(&mut self, key: usize) -> T {
        let slot = &mut self.slots[key];
        match std::mem::replace(slot, Slot::Vacant(self.next)) {
            Slot::Occupied(value) => {
                self.next = key;
                self.len -= 1;
                value
            }
            vacant => {
                *slot = vacant;
                panic!("MappedSlab::remove: no value at key {key}");
            }
        }
    }
}

impl<T> Index<usize> for MappedSlab<T> {
    type Output = T;

    #[inline]
    fn index(&self, key: usize) -> &T {
        match &self.slots[key] {
            Slot::Occupied(value) => value,
            Slot::Vacant(_) => panic!("MappedSlab: no value at key {key}"),
        }
    }
}

impl<T> IndexMut<usize> for MappedSlab<T> {
    #[inline]
    fn index_mut(&mut self, key: usize) -> &mut T {
        match &mut self.slots[key] {
            Slot::Occupied(value) => value,
            Slot::Vacant(_) => panic!("MappedSlab: no value at key {key}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_the_last_key_freed_and_keeps_the_others() {
        let mut slab = MappedSlab::new();
        assert!(slab.is_empty());
        let keys: Vec<usize> = (0..100).map(|i| slab.insert(i * 10)).collect();
        assert_eq!(keys, (0..100).collect::<Vec<_>>());
        assert_eq!(slab.remove(40), 400);
        assert_eq!(slab.remove(7), 70);
        assert_eq!(slab.get(40), None);
        assert_eq!(slab.get(1000), None);
        assert_eq!(slab.vacant_key(), 7);
        assert_eq!(slab.insert(1), 7, "the last key freed first");
        assert_eq!(slab.insert(2), 40);
        assert_eq!(slab.vacant_key(), 100);
        assert_eq!(slab.insert(3), 100);
        assert_eq!(slab.get_mut(40).map(|v| std::mem::replace(v, 4)), Some(2));
        assert_eq!(slab.get_mut(101), None);
        assert_eq!((slab[7], slab[40], slab[99]), (1, 4, 990));
        slab[99] += 1;
        assert_eq!(slab.get(99), Some(&991));
        for key in 0..=100 {
            slab.remove(key);
        }
        assert!(slab.is_empty());
    }

    #[test]
    #[should_panic(expected = "no value at key 3")]
    fn removing_a_vacant_key_panics() {
        let mut slab = MappedSlab::new();
        for i in 0..5 {
            slab.insert(i);
        }
        slab.remove(3);
        slab.remove(3);
    }
}
