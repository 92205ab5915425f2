//! [`Small`]: a list of `Copy` items kept inline up to `N` and on the heap
//! past that: a `select` of a few operations allocates nothing.

use std::ops::{Deref, DerefMut};

pub(crate) struct Small<T: Copy, const N: usize> {
    len: usize,
    inline: [T; N],
    /// All the items, once there are more than `N`.
    spill: Vec<T>,
}

impl<T: Copy, const N: usize> Small<T, N> {
    /// An empty list; `fill` stands in the unused inline places (never
    /// read as an item).
    #[inline]
    pub(crate) fn new(fill: T) -> Small<T, N> {
        Small {
            len: 0,
            inline: [fill; N],
            spill: Vec::new(),
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, item: T) {
        if self.len < N {
            self.inline[self.len] = item;
        } else {
            if self.len == N {
                self.spill.reserve(N * 2);
                self.spill.extend_from_slice(&self.inline);
            }
            self.spill.push(item);
        }
        self.len += 1;
    }

    pub(crate) fn swap_remove(&mut self, i: usize) -> T {
        let last = self.len - 1;
        self.swap(i, last);
        let item = self[last];
        if self.len > N {
            self.spill.pop();
            if self.len - 1 == N {
                self.inline.copy_from_slice(&self.spill);
                self.spill.clear();
            }
        }
        self.len -= 1;
        item
    }
}

impl<T: Copy, const N: usize> Deref for Small<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        if self.len <= N {
            &self.inline[..self.len]
        } else {
            &self.spill
        }
    }
}

impl<T: Copy, const N: usize> DerefMut for Small<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        if self.len <= N {
            &mut self.inline[..self.len]
        } else {
            &mut self.spill
        }
    }
}

impl<T: Copy, const N: usize> Clone for Small<T, N> {
    fn clone(&self) -> Self {
        Small {
            len: self.len,
            inline: self.inline,
            spill: self.spill.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Small;

    #[test]
    fn spills_and_comes_back() {
        let mut s: Small<u32, 2> = Small::new(0);
        for i in 1..=5 {
            s.push(i);
        }
        assert_eq!(&*s, &[1, 2, 3, 4, 5]);
        assert_eq!(s.swap_remove(0), 1);
        assert_eq!(&*s, &[5, 2, 3, 4]);
        s.swap_remove(3);
        s.swap_remove(2);
        assert_eq!(&*s, &[5, 2]);
        s.push(9);
        assert_eq!(&*s, &[5, 2, 9]);
    }
}
