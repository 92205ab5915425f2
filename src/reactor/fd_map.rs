//! Source keys by fd number.

use std::os::fd::RawFd;

/// Source keys by fd number. Fds are small and dense, so a vector beats a
/// hash map on the path every socket wait takes.
#[derive(Default)]
pub(super) struct FdMap(Vec<u32>);

impl FdMap {
    const NONE: u32 = u32::MAX;

    #[inline]
    pub(super) fn get(&self, fd: RawFd) -> Option<usize> {
        let key = *self.0.get(usize::try_from(fd).ok()?)?;
        (key != Self::NONE).then_some(key as usize)
    }

    pub(super) fn insert(&mut self, fd: RawFd, key: usize) {
        let (Ok(i), Ok(key)) = (usize::try_from(fd), u32::try_from(key)) else {
            unreachable!("an fd that epoll accepted, a slab key below 2^32");
        };
        if i >= self.0.len() {
            self.0.resize(i + 1, Self::NONE);
        }
        self.0[i] = key;
    }

    pub(super) fn remove(&mut self, fd: RawFd) {
        if let Ok(i) = usize::try_from(fd)
            && let Some(key) = self.0.get_mut(i)
        {
            *key = Self::NONE;
        }
    }
}
