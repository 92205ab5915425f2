//! The fibers waiting on one source ([`Waiters`]): the first two kept in
//! the source itself, any more in a vector.
//!
//! A socket has at most a reader and a writer waiting, most of the time,
//! and each round trip of a connection adds its waiter, finds it when the
//! event comes and removes it. Kept in a `Vec` of their own, the waiters
//! were a heap block apart from their source: with a thousand connections,
//! one more cold cache line (and often page) a round trip. The vector of
//! any more is looked at only when both inline slots are taken, so a
//! trip touches the inline part alone (the source's first cache line, see
//! `Source`).

use crate::reactor::Interest;
use crate::reactor::token::{Key, WakeToken};

/// One fiber waiting on a source: its token taken apart, so that a waiter
/// takes 16 bytes (a `WakeToken` field and two bytes beside it took 24).
#[derive(Clone, Copy)]
pub(super) struct Waiter {
    park: u64,
    key: Key,
    pub(super) interest: Interest,
    /// Readiness seen since the waiter registered.
    pub(super) ready: Interest,
}

impl Waiter {
    /// A waiter for `interest` that has seen nothing yet.
    pub(super) fn new(token: WakeToken, interest: Interest) -> Waiter {
        Waiter {
            park: token.park,
            key: token.key,
            interest,
            ready: Interest::EMPTY,
        }
    }

    pub(super) fn token(&self) -> WakeToken {
        WakeToken {
            key: self.key,
            park: self.park,
        }
    }

    /// The key of the context that waits.
    #[inline]
    pub(super) fn key(&self) -> Key {
        self.key
    }

    pub(super) fn set_token(&mut self, token: WakeToken) {
        self.key = token.key;
        self.park = token.park;
    }
}

const _: () = assert!(size_of::<Waiter>() == 16);

/// How many waiters a source keeps in place.
const INLINE: usize = 2;

/// What an unused inline slot holds (never read as a waiter).
const UNUSED: Waiter = Waiter {
    park: 0,
    key: 0,
    interest: Interest::EMPTY,
    ready: Interest::EMPTY,
};

/// The waiters of a source, in no particular order. In this order (the
/// inline slots and their count first, the vector last), so that a source
/// can keep the first part in its first cache line.
///
/// # Invariant
///
/// `inline[..len]` are waiters; `more` holds waiters only when `len` is
/// [`INLINE`] (a removal refills the inline slots from `more` first).
#[repr(C)]
pub(super) struct Waiters {
    inline: [Waiter; INLINE],
    len: u8,
    more: Vec<Waiter>,
}

impl Waiters {
    pub(super) const fn new() -> Waiters {
        Waiters {
            inline: [UNUSED; INLINE],
            len: 0,
            more: Vec::new(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn push(&mut self, waiter: Waiter) {
        if usize::from(self.len) < INLINE {
            self.inline[usize::from(self.len)] = waiter;
            self.len += 1;
        } else {
            self.more.push(waiter);
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Waiter> {
        self.inline[..usize::from(self.len)]
            .iter()
            .chain(self.more.iter())
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Waiter> {
        self.inline[..usize::from(self.len)]
            .iter_mut()
            .chain(self.more.iter_mut())
    }

    /// Notes `ready` in the waiters it concerns and pushes their tokens onto
    /// `wake`. (A loop per part rather than the chained iterator: this runs
    /// for every event. Inlined into the turn: a call of its own was a
    /// fifth of its instructions.)
    #[inline(always)]
    pub(super) fn mark_ready(&mut self, ready: Interest, wake: &mut Vec<WakeToken>) {
        let mark = |w: &mut Waiter, wake: &mut Vec<WakeToken>| {
            let hit = w.interest & ready;
            if !hit.is_empty() {
                w.ready = w.ready | hit;
                wake.push(w.token());
            }
        };
        for w in &mut self.inline[..usize::from(self.len)] {
            mark(w, wake);
        }
        if usize::from(self.len) == INLINE && !self.more.is_empty() {
            for w in &mut self.more {
                mark(w, wake);
            }
        }
    }

    /// Removes a waiter of context `key`, if there is one (see
    /// `reactor::Registration` on why the key names it). Inline for the
    /// usual case, the source's only waiter (every socket wait ends here).
    #[inline]
    pub(super) fn remove(&mut self, key: Key) {
        if self.len == 1 && self.inline[0].key == key {
            self.len = 0;
            return;
        }
        self.remove_any(key);
    }

    #[inline(never)]
    fn remove_any(&mut self, key: Key) {
        let len = usize::from(self.len);
        if let Some(i) = self.inline[..len].iter().position(|w| w.key == key) {
            // Refill the slot from the spill-over, else from the last
            // inline waiter. (`more` is empty unless both slots are taken.)
            let spilled = if len == INLINE { self.more.pop() } else { None };
            self.inline[i] = match spilled {
                Some(w) => w,
                None => {
                    self.len -= 1;
                    self.inline[len - 1]
                }
            };
        } else if let Some(i) = self.more.iter().position(|w| w.key == key) {
            self.more.swap_remove(i);
        }
    }

    /// Moves every waiter's token to `to`, leaving none.
    pub(super) fn drain_tokens(&mut self, to: &mut Vec<WakeToken>) {
        to.extend(
            self.inline[..usize::from(self.len)]
                .iter()
                .map(Waiter::token),
        );
        to.extend(self.more.drain(..).map(|w| w.token()));
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(key: u32) -> Waiter {
        Waiter::new(WakeToken { key, park: 1 }, Interest::READABLE)
    }

    fn keys(w: &Waiters) -> Vec<u32> {
        let mut k: Vec<u32> = w.iter().map(|w| w.token().key).collect();
        k.sort_unstable();
        k
    }

    #[test]
    fn an_event_marks_and_wakes_the_waiters_it_concerns_inline_and_spilled() {
        let mut w = Waiters::new();
        for key in 1..=5 {
            let mut one = waiter(key);
            if key % 2 == 0 {
                one.interest = Interest::WRITABLE;
            }
            w.push(one);
        }
        let mut wake = Vec::new();
        w.mark_ready(Interest::READABLE, &mut wake);
        let mut woken: Vec<u32> = wake.iter().map(|t| t.key).collect();
        woken.sort_unstable();
        assert_eq!(woken, [1, 3, 5]); // 1 inline, 3 and 5 spilled
        for one in w.iter() {
            let expect = if one.token().key % 2 == 0 {
                Interest::EMPTY
            } else {
                Interest::READABLE
            };
            assert!(one.ready == expect, "waiter {}", one.token().key);
        }
    }

    #[test]
    fn any_number_of_waiters_come_and_go_in_any_order() {
        let mut w = Waiters::new();
        assert!(w.is_empty());
        for key in 1..=5 {
            w.push(waiter(key));
        }
        assert_eq!(keys(&w), [1, 2, 3, 4, 5]);
        w.remove(1); // inline, refilled from the spill-over
        assert_eq!(keys(&w), [2, 3, 4, 5]);
        w.remove(4); // in the spill-over
        assert_eq!(keys(&w), [2, 3, 5]);
        w.remove(9); // not there: nothing happens
        assert_eq!(keys(&w), [2, 3, 5]);
        for w in w.iter_mut() {
            w.ready = Interest::READABLE;
        }
        assert!(w.iter().all(|w| w.ready == Interest::READABLE));
        w.remove(2);
        w.remove(5);
        assert_eq!(keys(&w), [3]);
        w.remove(3);
        assert!(w.is_empty() && w.iter().next().is_none());
        w.push(waiter(7));
        w.push(waiter(8));
        w.push(waiter(9));
        let mut tokens = Vec::new();
        w.drain_tokens(&mut tokens);
        assert_eq!(tokens.len(), 3);
        assert!(w.is_empty() && w.iter().next().is_none());
    }
}
