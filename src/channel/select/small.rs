//! [`Small`]: a list of `Copy` items kept inline up to `N` and on the heap
//! past that: a `select` of a few operations allocates nothing. [`Order`]:
//! the order a select tries them in, drawn from [`Rng`].

use std::cell::Cell;
use std::ops::{Deref, DerefMut};

use crate::timer::clock;

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

/// The order a select tries its operations in: a permutation of `0..len`,
/// packed in the nibbles of one word for up to 16 operations, listed past
/// that. Packed, it is made and read in registers: a shuffle of an array
/// in memory, its stores and loads at random places, stalled the processor
/// on the memory dependences it mispredicted (perf: a tenth of a select).
pub(crate) struct Order {
    len: usize,
    packed: u64,
    listed: Vec<usize>,
}

/// The identity permutation of 16, packed.
const IDENTITY: u64 = 0xFEDC_BA98_7654_3210;

/// Selects of up to this many operations draw their order from
/// [`PERMUTATIONS`].
const TABLED: usize = 5;
const FACTORIAL: [usize; TABLED + 1] = [1, 1, 2, 6, 24, 120];
/// Where the permutations of each length start in [`PERMUTATIONS`].
const TABLE_START: [usize; TABLED + 1] = [0, 0, 0, 2, 8, 32];
/// How many permutations the table holds, of every length it covers.
const TABLE_LEN: usize = TABLE_START[TABLED] + FACTORIAL[TABLED];

/// Every permutation of `0..len` for `len` from 2 to [`TABLED`], packed
/// (the nibbles past `len` as in [`IDENTITY`]), the `k`th of each length
/// the one whose Lehmer code is `k`.
static PERMUTATIONS: [u64; TABLE_LEN] = permutations();

const fn permutations() -> [u64; TABLE_LEN] {
    let mut table = [0u64; TABLE_LEN];
    let mut len = 2;
    while len <= TABLED {
        let mut code = 0;
        while code < FACTORIAL[len] {
            // Decode `code`: each digit picks one of the places not yet
            // taken, in order.
            let mut left = [0usize; TABLED];
            let mut n = 0;
            while n < len {
                left[n] = n;
                n += 1;
            }
            let mut packed = IDENTITY;
            let mut rest = code;
            let mut pos = 0;
            while pos < len {
                let radix = FACTORIAL[len - 1 - pos];
                let digit = rest / radix;
                rest %= radix;
                let pick = left[digit];
                // Close the gap.
                let mut i = digit;
                while i + 1 < len - pos {
                    left[i] = left[i + 1];
                    i += 1;
                }
                packed = (packed & !(0xF << (4 * pos))) | ((pick as u64) << (4 * pos));
                pos += 1;
            }
            table[TABLE_START[len] + code] = packed;
            code += 1;
        }
        len += 1;
    }
    table
}

impl Order {
    /// `0..len` in order.
    #[inline]
    pub(crate) fn identity(len: usize) -> Order {
        Order {
            len,
            packed: IDENTITY,
            listed: if len > 16 {
                (0..len).collect()
            } else {
                Vec::new()
            },
        }
    }

    /// `0..len` in a random order, drawn from `rng`: for up to five
    /// operations, one of a table's permutations (one draw and a load);
    /// for more, Fisher-Yates.
    #[inline(always)]
    pub(crate) fn shuffled(len: usize, rng: &mut Rng) -> Order {
        if (2..=TABLED).contains(&len) {
            // A shuffle's swaps are a chain of dependent shifts: a hundred
            // instructions a select of four (callgrind), where a select's
            // try of one ready operation takes some three hundred.
            let count = FACTORIAL[len] as u64;
            let k = (((rng.next_u64() >> 32) * count) >> 32) as usize;
            Order {
                len,
                packed: PERMUTATIONS[TABLE_START[len] + k],
                listed: Vec::new(),
            }
        } else {
            Order::swapped(len, rng)
        }
    }

    /// [`Order::shuffled`] past the table.
    #[inline(never)]
    fn swapped(len: usize, rng: &mut Rng) -> Order {
        let mut order = Order::identity(len);
        if len <= 16 {
            let mut packed = IDENTITY;
            // Four swaps a draw, each from 16 bits of it (a bias of at most
            // 16 in 65 536 towards some places: none worth a draw a swap).
            let mut bits = 0u64;
            for (k, i) in (1..len).rev().enumerate() {
                if k % 4 == 0 {
                    bits = rng.next_u64();
                }
                let j = (((bits & 0xFFFF) * (i as u64 + 1)) >> 16) as usize;
                bits >>= 16;
                let (si, sj) = (4 * i as u32, 4 * j as u32);
                // Swaps nibbles `i` and `j` (nothing when they are one).
                let diff = ((packed >> si) ^ (packed >> sj)) & 0xF;
                packed ^= (diff << si) | (diff << sj);
            }
            order.packed = packed;
        } else {
            for i in (1..len).rev() {
                order.listed.swap(i, rng.below(i + 1));
            }
        }
        order
    }

    /// `0..len` in a random order, drawn from this thread's generator (one
    /// read and one write of its state). In line, as is `shuffled`'s
    /// table: the order is made in registers in the select's loop (an
    /// `Order` returned from a call came back through memory and stalled
    /// the first read of it).
    #[inline(always)]
    pub(crate) fn random(len: usize) -> Order {
        thread_local! {
            static STATE: Cell<u64> = const { Cell::new(0) };
        }
        let mut x = STATE.get();
        if x == 0 {
            x = seed();
        }
        let mut rng = Rng::new(x);
        let order = Order::shuffled(len, &mut rng);
        // (A state of 0 would be seeded again: harmless.)
        STATE.set(rng.state());
        order
    }

    /// The first `n` operations, in order.
    pub(crate) fn first(&self, n: usize) -> impl Iterator<Item = usize> + '_ {
        // Packed or listed asked once, not at each step.
        let packed = (self.len <= 16).then_some(self.packed);
        (0..n.min(self.len)).map(move |k| match packed {
            Some(packed) => ((packed >> (4 * k as u32)) & 0xF) as usize,
            None => self.listed[k],
        })
    }

    /// Every operation, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.first(self.len)
    }
}

/// A thread's first seed: the clock and where something of the thread's
/// lives (two threads seeded at one time differ).
#[cold]
fn seed() -> u64 {
    let here = 0u8;
    (clock::now_ns() ^ std::ptr::from_ref(&here) as u64) | 1
}

/// A random number generator for the order of selects: wyrand (a 64-bit
/// counter, mixed by one wide multiply), small, fast and good enough for
/// a fair choice.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn state(&self) -> u64 {
        self.0
    }

    /// 64 random bits.
    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.0) * u128::from(self.0 ^ 0xe703_7ed1_a0b4_28db);
        ((t >> 64) ^ t) as u64
    }

    /// A number below `n` (`n` ≤ 2^32).
    #[inline]
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::{Order, Rng, Small};

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

    #[test]
    fn orders_are_permutations_and_each_comes_first_fairly() {
        let mut rng = Rng::new(12345);
        for len in [1, 2, 3, 4, 7, 16, 17, 40] {
            let mut firsts = vec![0u32; len];
            for _ in 0..len * 2000 {
                let order = Order::shuffled(len, &mut rng);
                let mut seen: Vec<usize> = order.iter().collect();
                firsts[seen[0]] += 1;
                seen.sort_unstable();
                assert_eq!(seen, (0..len).collect::<Vec<_>>());
            }
            // Each first about 2000 times: far from 0 or from twice that.
            for (i, &n) in firsts.iter().enumerate() {
                assert!((1000..3000).contains(&n), "len {len}: {i} first {n} times");
            }
        }
        // Every permutation of a tabled length comes, about as often.
        for len in 2..=super::TABLED {
            let mut seen = std::collections::HashMap::new();
            let draws = super::FACTORIAL[len] * 500;
            for _ in 0..draws {
                let order: Vec<usize> = Order::shuffled(len, &mut rng).iter().collect();
                *seen.entry(order).or_insert(0u32) += 1;
            }
            assert_eq!(seen.len(), super::FACTORIAL[len], "len {len}");
            assert!(
                seen.values().all(|&n| (250..750).contains(&n)),
                "len {len}: {seen:?}"
            );
        }
        let id: Vec<usize> = Order::identity(20).first(3).collect();
        assert_eq!(id, [0, 1, 2]);
    }
}
