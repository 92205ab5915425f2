//! A hierarchical timer wheel: O(1) to arm and to cancel.
//!
//! Socket deadlines are armed and cancelled far more often than they fire, so
//! both must be constant time; firing may cost a little more.
//!
//! ## Levels
//!
//! Time is counted in ticks of 2^10 ns (1.024 µs): fine enough that a short
//! sleep is not rounded up to a coarse tick, while a timer cascades at most
//! a few times (every cascade is one re-insertion). Level `L` has 64 slots,
//! each spanning 64^L ticks, so level 0 covers the next 65 µs tick by tick,
//! level 1 the next 4 ms, level 2 the next 268 ms, level 3 the next 17 s,
//! and so on; eleven levels cover the whole `u64` range, so no deadline ever
//! needs clamping.
//!
//! An entry due at tick `when` lives at the level of the highest 6-bit digit
//! in which `when` differs from `elapsed` (the first tick not yet
//! processed), in the slot named by that digit of `when`. When processing
//! reaches the start of a slot above level 0, its entries are re-inserted
//! and so cascade to a lower level; a level-0 slot holds entries of exactly
//! one tick, which fire.
//!
//! ## Never early, in deadline order
//!
//! An entry's tick is its deadline rounded *up*, and it fires only once that
//! tick has begun, so an entry never fires before its deadline. Everything
//! that fires in one [`Wheel::advance`] is sorted by exact deadline (ties in
//! the order they were armed) before it is handed out.

use crate::mem::MappedSlab;

/// log2 of the tick length in nanoseconds.
pub(crate) const TICK_SHIFT: u32 = 10;
/// The tick `u64::MAX` ns rounds up to: 2^54, which begins one past the
/// end of the `u64` range. Ticks live in `0..=LAST_TICK`; the start of
/// every one but this fits a `u64` (see [`tick_start_ns`]).
const LAST_TICK: u64 = u64::MAX.div_ceil(1 << TICK_SHIFT);
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
const LEVELS: usize = 11;
const NIL: u32 = u32::MAX;

/// Names an armed timer, for [`Wheel::cancel`]. Stale keys (of timers that
/// fired or were cancelled) are recognised and ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimerKey {
    index: u32,
    seq: u64,
}

struct Entry<T> {
    /// Exact deadline in nanoseconds on the wheel's clock.
    deadline: u64,
    /// The deadline's tick, rounded up.
    when: u64,
    /// Arming order, unique per wheel: ties break on it and it tells stale
    /// keys from live ones.
    seq: u64,
    level: u8,
    slot: u8,
    prev: u32,
    next: u32,
    value: T,
}

/// A timer that [`Wheel::advance`] found due.
pub(crate) struct Fired<T> {
    /// Its exact deadline, in nanoseconds.
    pub(crate) deadline: u64,
    seq: u64,
    pub(crate) value: T,
}

/// The timer wheel; `T` is what a timer carries (for fibra, whom to wake).
pub(crate) struct Wheel<T> {
    /// In a mapping of their own (see `mem`): one per sleeping fiber.
    entries: MappedSlab<Entry<T>>,
    /// Boxed: 2 816 bytes that a turn with no timer never reads, and
    /// that inline would spread the scheduler's hot fields (a wheel is one
    /// of them) over more cache lines and pages.
    heads: Box<[[u32; SLOTS]; LEVELS]>,
    occupied: [u64; LEVELS],
    /// Every tick before this one has been processed.
    elapsed: u64,
    next_seq: u64,
}

impl<T> Wheel<T> {
    pub(crate) fn new() -> Self {
        Wheel {
            entries: MappedSlab::new(),
            heads: Box::new([[NIL; SLOTS]; LEVELS]),
            occupied: [0; LEVELS],
            elapsed: 0,
            next_seq: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Moves the clock of a wheel with no timer armed up to `now`
    /// (nanoseconds); with timers armed it does nothing (`advance` keeps
    /// it). Call it before arming the first timer: a wheel's clock stands
    /// where its last `advance` left it (0 for a new one), and a timer
    /// armed hours later would be filed against that old time, with a
    /// cascade point (see [`Wheel::next_expiration`]) that may lie in the
    /// past: a wake-up at once, for nothing.
    pub(crate) fn catch_up(&mut self, now: u64) {
        if self.entries.is_empty() {
            self.elapsed = self.elapsed.max(ticks_begun(now));
        }
    }

    /// Arms a timer that fires once `advance` is given a time at or past
    /// `deadline` (nanoseconds). A deadline in the past fires at the next
    /// `advance`.
    pub(crate) fn insert(&mut self, deadline: u64, value: T) -> TimerKey {
        let when = deadline.div_ceil(1 << TICK_SHIFT).max(self.elapsed);
        let seq = self.next_seq;
        self.next_seq += 1;
        let index = self.entries.insert(Entry {
            deadline,
            when,
            seq,
            level: 0,
            slot: 0,
            prev: NIL,
            next: NIL,
            value,
        });
        let index = u32::try_from(index).expect("more than 4 billion timers");
        self.link(index);
        TimerKey { index, seq }
    }

    /// Disarms a timer and returns its value; `None` if it already fired or
    /// was cancelled.
    pub(crate) fn cancel(&mut self, key: TimerKey) -> Option<T> {
        match self.entries.get(key.index as usize) {
            Some(e) if e.seq == key.seq => {}
            _ => return None,
        }
        self.unlink(key.index);
        Some(self.entries.remove(key.index as usize).value)
    }

    /// The nanosecond time at which the next `advance` will have work: a
    /// timer firing or a slot cascading. `None` when no timer is armed.
    ///
    /// The empty wheel's answer is inline: every turn of a runtime asks,
    /// mostly of an empty wheel, and a call was a code line more a turn.
    #[inline]
    pub(crate) fn next_expiration(&self) -> Option<u64> {
        if self.entries.is_empty() {
            return None;
        }
        self.next_expiration_of_some()
    }

    #[inline(never)]
    fn next_expiration_of_some(&self) -> Option<u64> {
        self.next_slot().map(|(_, _, tick)| tick_start_ns(tick))
    }

    /// Processes time up to `now` (nanoseconds): every timer whose deadline is
    /// at or before `now` is removed and appended to `fired`, sorted by
    /// deadline, ties in arming order.
    pub(crate) fn advance(&mut self, now: u64, fired: &mut Vec<Fired<T>>) {
        let now_tick = ticks_begun(now);
        let start = fired.len();
        while let Some((level, slot, tick)) = self.next_slot() {
            if tick > now_tick {
                break;
            }
            self.elapsed = tick;
            let mut cursor = std::mem::replace(&mut self.heads[level][slot], NIL);
            self.occupied[level] &= !(1u64 << slot);
            while cursor != NIL {
                let index = cursor;
                let entry = &mut self.entries[index as usize];
                cursor = entry.next;
                if level == 0 {
                    // A level-0 slot holds one tick, which has begun, and the
                    // deadline rounds up to its tick: it is due.
                    debug_assert!(entry.deadline <= now);
                    let entry = self.entries.remove(index as usize);
                    fired.push(Fired {
                        deadline: entry.deadline,
                        seq: entry.seq,
                        value: entry.value,
                    });
                } else {
                    self.link(index);
                }
            }
        }
        self.elapsed = self.elapsed.max(now_tick);
        fired[start..].sort_unstable_by_key(|f| (f.deadline, f.seq));
    }

    /// The first occupied slot as `(level, slot, tick at which it is due)`.
    /// The lowest occupied level holds the earliest slot: every entry above
    /// level 0 lies beyond the current level-0 window, and so on upwards.
    fn next_slot(&self) -> Option<(usize, usize, u64)> {
        if self.entries.is_empty() {
            // Asked before every poll, mostly of an empty wheel: skip the
            // look at each level.
            return None;
        }
        for level in 0..LEVELS {
            let occupied = self.occupied[level];
            if occupied == 0 {
                continue;
            }
            let shift = SLOT_BITS * level as u32;
            let current = ((self.elapsed >> shift) & (SLOTS as u64 - 1)) as u32;
            // By the placement rule no occupied slot lies behind `current`.
            let ahead = occupied & (u64::MAX << current);
            debug_assert_eq!(ahead, occupied, "timer wheel slot behind the cursor");
            let slot = ahead.trailing_zeros() as u64;
            let window = shift + SLOT_BITS;
            let window_start = if window >= 64 {
                0
            } else {
                self.elapsed & !((1u64 << window) - 1)
            };
            return Some((level, slot as usize, window_start + (slot << shift)));
        }
        None
    }

    fn link(&mut self, index: u32) {
        let when = self.entries[index as usize].when;
        let level = level_for(self.elapsed, when);
        let slot = ((when >> (SLOT_BITS * level as u32)) & (SLOTS as u64 - 1)) as usize;
        let head = self.heads[level][slot];
        let entry = &mut self.entries[index as usize];
        entry.level = level as u8;
        entry.slot = slot as u8;
        entry.prev = NIL;
        entry.next = head;
        if head != NIL {
            self.entries[head as usize].prev = index;
        }
        self.heads[level][slot] = index;
        self.occupied[level] |= 1 << slot;
    }

    fn unlink(&mut self, index: u32) {
        let e = &self.entries[index as usize];
        let (level, slot, prev, next) = (e.level as usize, e.slot as usize, e.prev, e.next);
        if prev == NIL {
            self.heads[level][slot] = next;
            if next == NIL {
                self.occupied[level] &= !(1 << slot);
            }
        } else {
            self.entries[prev as usize].next = next;
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
    }
}

/// The nanosecond time at which `tick` begins. [`LAST_TICK`] would begin
/// at 2^64 ns, past the clock's range: it saturates to `u64::MAX`, which
/// [`ticks_begun`] maps back to it. (A plain shift wrapped to 0 there, so
/// a timer due at or near `u64::MAX` ns — `sleep(Duration::MAX)` — looked
/// due at once, forever: the runtime polled without sleeping.)
fn tick_start_ns(tick: u64) -> u64 {
    debug_assert!(tick <= LAST_TICK);
    tick.saturating_mul(1 << TICK_SHIFT)
}

/// The last tick that has begun at `now` ns: every deadline in it and
/// before it is at or before `now`. At `u64::MAX` every deadline is due,
/// those that round up to [`LAST_TICK`] too.
fn ticks_begun(now: u64) -> u64 {
    if now == u64::MAX {
        LAST_TICK
    } else {
        now >> TICK_SHIFT
    }
}

/// The level at which a timer due at `when` is kept, given `elapsed`.
fn level_for(elapsed: u64, when: u64) -> usize {
    // `| (SLOTS - 1)` makes equal ticks land on level 0.
    let masked = (elapsed ^ when) | (SLOTS as u64 - 1);
    let significant = 63 - masked.leading_zeros();
    (significant / SLOT_BITS) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: u64 = 1 << TICK_SHIFT;

    fn drain(w: &mut Wheel<u32>, now: u64) -> Vec<u32> {
        let mut fired = Vec::new();
        w.advance(now, &mut fired);
        fired.into_iter().map(|f| f.value).collect()
    }

    #[test]
    fn level_arithmetic() {
        assert_eq!(level_for(0, 0), 0);
        assert_eq!(level_for(0, 63), 0);
        assert_eq!(level_for(0, 64), 1);
        assert_eq!(level_for(0, 4095), 1);
        assert_eq!(level_for(0, 4096), 2);
        assert_eq!(level_for(100, 127), 0);
        assert_eq!(level_for(100, 128), 1);
        assert_eq!(level_for(0, u64::MAX), 10);
    }

    #[test]
    fn never_early_and_never_lost() {
        // Deadlines spread over every level, including the far future.
        let mut deadlines: Vec<u64> = Vec::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in 0..3000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let span = [100 * TICK, 10_000 * TICK, 1 << 40, 1 << 50][(i % 4) as usize];
            deadlines.push(x % span);
        }
        let mut w = Wheel::new();
        for (i, &d) in deadlines.iter().enumerate() {
            w.insert(d, i as u32);
        }
        let mut now = 0u64;
        let mut fired_total = 0;
        let mut step = TICK / 3;
        while fired_total < deadlines.len() {
            let mut fired = Vec::new();
            w.advance(now, &mut fired);
            for f in &fired {
                assert_eq!(f.deadline, deadlines[f.value as usize]);
                assert!(f.deadline <= now, "fired early: {} > {now}", f.deadline);
                // Late by less than one tick, plus the step we advance by.
                assert!(now - f.deadline < TICK + step, "fired late");
            }
            assert!(
                fired.windows(2).all(|p| p[0].deadline <= p[1].deadline),
                "out of order"
            );
            fired_total += fired.len();
            // Jump to the next expiration, stepping finely near it.
            now = match w.next_expiration() {
                Some(next) if next > now + step => next,
                _ => now + step,
            };
            step = (step * 2).min(TICK / 3);
        }
        assert!(w.is_empty());
    }

    /// Drives `w` from `now` by its own `next_expiration` until it is
    /// empty: nothing fires early or more than a tick late, and after every
    /// advance the next expiration lies ahead (a runtime that found it due
    /// at once would poll without sleeping, forever).
    fn drive_to_the_end(w: &mut Wheel<u32>, deadlines: &[u64], mut now: u64) {
        let mut fired_total = 0;
        let mut fired = Vec::new();
        let mut rounds = 0;
        while fired_total < deadlines.len() {
            rounds += 1;
            assert!(rounds < 100_000, "the wheel does not converge");
            fired.clear();
            w.advance(now, &mut fired);
            for f in &fired {
                assert_eq!(f.deadline, deadlines[f.value as usize]);
                assert!(f.deadline <= now, "fired early: {} > {now}", f.deadline);
                assert!(
                    now - f.deadline < TICK,
                    "fired late: {} at {now}",
                    f.deadline
                );
            }
            fired_total += fired.len();
            match w.next_expiration() {
                Some(next) => {
                    assert!(next > now, "due again at once: {next} <= {now}");
                    now = next;
                }
                None => assert_eq!(fired_total, deadlines.len(), "timers lost"),
            }
        }
        assert!(w.is_empty());
    }

    #[test]
    fn the_end_of_time_is_never_due_early() {
        // A sleep of Duration::MAX: the deadline saturates to u64::MAX.
        let mut w = Wheel::new();
        w.insert(u64::MAX, 0);
        let next = w.next_expiration().unwrap();
        assert_eq!(next, u64::MAX, "the last tick starts at the end of time");
        let now = 1 << 40;
        assert!(drain(&mut w, now).is_empty());
        assert!(w.next_expiration().unwrap() > now);
        assert!(drain(&mut w, u64::MAX - 1).is_empty());
        assert_eq!(w.next_expiration(), Some(u64::MAX));
        assert_eq!(drain(&mut w, u64::MAX), vec![0]);
        assert!(w.is_empty());
    }

    #[test]
    fn deadlines_at_the_edges_of_the_range() {
        // The top of the range, tick and level boundaries, and their
        // neighbours, armed from a few starting points.
        let mut deadlines = vec![0, 1, TICK - 1, TICK, TICK + 1, u64::MAX];
        for k in 0..=64u32 {
            let edge = 1u64.checked_shl(k).unwrap_or(u64::MAX);
            deadlines.extend([edge.saturating_sub(1), edge, edge.saturating_add(1)]);
        }
        for k in 0..2048u64 {
            deadlines.push(u64::MAX - k);
        }
        let top = (LAST_TICK - 1) << TICK_SHIFT;
        deadlines.extend([top - 1, top, top + 1]);
        for start in [0, 12_345 * TICK + 7, 1 << 62, u64::MAX - 5 * TICK] {
            let mut w = Wheel::new();
            assert!(drain(&mut w, start).is_empty());
            // A deadline already past fires at the next advance, on time.
            let live: Vec<u64> = deadlines.iter().map(|&d| d.max(start)).collect();
            for (i, &d) in live.iter().enumerate() {
                w.insert(d, i as u32);
            }
            drive_to_the_end(&mut w, &live, start);
        }
    }

    #[test]
    fn tick_arithmetic_at_the_edges() {
        assert_eq!(LAST_TICK, 1 << 54);
        assert_eq!(tick_start_ns(0), 0);
        assert_eq!(tick_start_ns(LAST_TICK - 1), u64::MAX - (TICK - 1));
        assert_eq!(tick_start_ns(LAST_TICK), u64::MAX);
        assert_eq!(ticks_begun(u64::MAX), LAST_TICK);
        assert_eq!(ticks_begun(u64::MAX - 1), LAST_TICK - 1);
        assert_eq!(ticks_begun(TICK - 1), 0);
        assert_eq!(ticks_begun(TICK), 1);
        assert_eq!(level_for(0, LAST_TICK), 9);
        assert_eq!(level_for(LAST_TICK, LAST_TICK), 0);
        assert_eq!(level_for(LAST_TICK - 1, LAST_TICK), 9);
    }

    #[test]
    fn same_tick_fires_in_deadline_then_arming_order() {
        let mut w = Wheel::new();
        w.insert(10 * TICK + 500, 1);
        w.insert(10 * TICK + 100, 2);
        w.insert(10 * TICK + 500, 3);
        w.insert(10 * TICK + 100, 4);
        assert_eq!(drain(&mut w, 11 * TICK), vec![2, 4, 1, 3]);
    }

    #[test]
    fn cancel_is_exact_and_stale_keys_are_ignored() {
        let mut w = Wheel::new();
        let a = w.insert(5 * TICK, 1);
        let b = w.insert(5 * TICK, 2);
        let c = w.insert(70 * TICK, 3);
        assert_eq!(w.cancel(b), Some(2));
        assert_eq!(w.cancel(b), None);
        assert_eq!(drain(&mut w, 6 * TICK), vec![1]);
        assert_eq!(w.cancel(a), None, "a fired");
        // The slab slot of `a` is reused; its old key must not cancel the new timer.
        let d = w.insert(8 * TICK, 4);
        assert_eq!(w.cancel(a), None);
        assert_eq!(w.cancel(c), Some(3));
        assert_eq!(drain(&mut w, 100 * TICK), vec![4]);
        assert_eq!(w.cancel(d), None);
        assert!(w.is_empty());
    }

    #[test]
    fn past_deadlines_fire_at_the_next_advance() {
        let mut w = Wheel::new();
        assert!(drain(&mut w, 1000 * TICK).is_empty());
        w.insert(3, 7);
        assert_eq!(w.next_expiration(), Some(1000 * TICK));
        assert_eq!(drain(&mut w, 1000 * TICK), vec![7]);
    }

    #[test]
    fn a_wheel_caught_up_to_now_never_reports_a_past_expiration() {
        // A clock 2^36 ticks and a bit on (about 19.5 hours of uptime),
        // a sleep of an hour from there.
        let now = ((1u64 << 36) + 12_345) * TICK;
        let deadline = now + 3_600_000_000_000;
        let mut stale = Wheel::new();
        stale.insert(deadline, 1);
        // Filed against a clock at 0, its cascade point is long past.
        assert!(stale.next_expiration().unwrap() < now);
        let mut w = Wheel::new();
        w.catch_up(now);
        w.insert(deadline, 1);
        let next = w.next_expiration().unwrap();
        assert!(next > now && next <= deadline, "{next} against {now}");
        // With a timer armed, catching up does nothing: `advance` must
        // see every tick.
        w.catch_up(deadline + TICK);
        assert_eq!(w.next_expiration(), Some(next));
        assert_eq!(drain(&mut w, deadline), vec![1]);
    }

    #[test]
    fn next_expiration_reports_cascade_points() {
        let mut w = Wheel::new();
        assert_eq!(w.next_expiration(), None);
        w.insert(200 * TICK, 1);
        // Level 1, slot 3 starts at tick 192.
        assert_eq!(w.next_expiration(), Some(192 * TICK));
        assert!(drain(&mut w, 192 * TICK).is_empty());
        assert_eq!(w.next_expiration(), Some(200 * TICK));
        assert_eq!(drain(&mut w, 200 * TICK), vec![1]);
    }
}
