//! The storage behind `bounded(n)` for n ≥ 1: a ring of `n` slots and no
//! lock (Dmitry Vyukov's bounded queue, as crossbeam-channel's `array`
//! flavor).
//!
//! `head` and `tail` are positions: a slot index in the low bits, a lap
//! count above them, and in `tail` a mark bit between the two that says the
//! channel is disconnected. Each slot has a stamp, the position it is
//! ready for:
//!
//! - stamp = position: empty, ready for a send at that position;
//! - stamp = position + 1: holds the message sent at that position, ready
//!   for a receive; with the mark bit set too (never part of a position
//!   below the lap count), a hole: a send claimed the slot and wrote
//!   nothing;
//! - stamp = position + one lap: read, ready for the send of the next lap.
//!
//! A send claims the slot at `tail` by moving `tail` on (compare-exchange)
//! when the slot's stamp says it is empty, writes the message, then
//! publishes it with the stamp (release). A receive claims the slot at
//! `head` the same way when the stamp says it is full, reads, and frees the
//! slot for the next lap with the stamp.

use std::mem::MaybeUninit;

use super::{Claim, NoClaim, Slots};
use crate::atomic::{AtomicUsize, Cell, Ordering, fence, spin_loop};
use crate::channel::backoff::{Backoff, Pause};

pub(crate) struct ArraySlots<T> {
    head: Padded<AtomicUsize>,
    tail: Padded<AtomicUsize>,
    slots: Box<[Slot<T>]>,
    cap: usize,
    /// The disconnected bit of `tail`; the slot index is below it.
    mark: usize,
    /// One lap: the lap count sits above `mark`.
    lap: usize,
}

/// Keeps `head` and `tail` on cache lines of their own: senders and
/// receivers do not invalidate each other's.
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

struct Slot<T> {
    /// The position it is ready for (see the module docs); with `mark`,
    /// a hole. A slot is two words for a word-sized message, as
    /// crossbeam's: a flag of its own made it three, and a sender that
    /// streams into a large ring wrote half as much memory again.
    stamp: AtomicUsize,
    message: Cell<MaybeUninit<T>>,
}

// SAFETY: the slots' messages move between threads only through a claim,
// which one party holds at a time (the stamps order the hand-over with
// release and acquire): like a `Mutex<T>`, `Send` for `T: Send`.
unsafe impl<T: Send> Send for ArraySlots<T> {}
// SAFETY: as above; `&ArraySlots` hands messages out only through claims.
unsafe impl<T: Send> Sync for ArraySlots<T> {}

/// The most bytes of slots a channel allocates up front; a larger
/// `bounded(n)` takes the locked channel, which grows as it fills.
pub(crate) const MAX_RING_BYTES: usize = 64 << 20;

impl<T> ArraySlots<T> {
    /// Whether a ring of `cap` slots of `T` fits [`MAX_RING_BYTES`].
    pub(crate) fn fits(cap: usize) -> bool {
        cap >= 1
            && cap
                .checked_mul(std::mem::size_of::<Slot<T>>())
                .is_some_and(|b| b <= MAX_RING_BYTES)
    }

    pub(crate) fn new(cap: usize) -> ArraySlots<T> {
        assert!(Self::fits(cap), "a ring of {cap} slots");
        let mark = (cap + 1).next_power_of_two();
        let slots = (0..cap)
            .map(|i| Slot {
                stamp: AtomicUsize::new(i),
                message: Cell::new(MaybeUninit::uninit()),
            })
            .collect();
        ArraySlots {
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
            slots,
            cap,
            mark,
            lap: mark * 2,
        }
    }

    /// `start_send` past its first try: every case, waits included.
    #[inline(never)]
    fn start_send_slow(&self, wait_for_readers: bool) -> Result<Claim, NoClaim> {
        let mut lost = Backoff::default();
        let mut pause = Pause::default();
        let mut tail = self.tail.load(Ordering::Relaxed);
        loop {
            if tail & self.mark != 0 {
                return Err(NoClaim::Disconnected);
            }
            let slot = self.slot(tail);
            let stamp = slot.stamp.load(Ordering::Acquire);
            if stamp == tail {
                let next = self.next(tail);
                match self.tail.compare_exchange_weak(
                    tail,
                    next,
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        return Ok(Claim {
                            slot: std::ptr::from_ref(slot).cast(),
                            pos: tail,
                        });
                    }
                    Err(now) => {
                        tail = now;
                        lost.spin();
                        continue;
                    }
                }
            }
            if (stamp & !self.mark).wrapping_add(self.lap) == tail + 1 {
                // The slot holds the last lap's message: full, unless a
                // receive has claimed it and is reading it.
                fence(Ordering::SeqCst);
                if self.head.load(Ordering::Relaxed).wrapping_add(self.lap) == tail {
                    return Err(NoClaim::NotReady);
                }
                if !wait_for_readers {
                    return Err(NoClaim::NotReady);
                }
            }
            if wait_for_readers {
                pause.pause();
            } else {
                spin_loop();
            }
            tail = self.tail.load(Ordering::Relaxed);
        }
    }

    /// `start_recv` past its first try: every case, waits included.
    #[inline(never)]
    fn start_recv_slow(&self, wait_for_writers: bool, freed: &mut bool) -> Result<Claim, NoClaim> {
        let mut lost = Backoff::default();
        let mut pause = Pause::default();
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let slot = self.slot(head);
            let stamp = slot.stamp.load(Ordering::Acquire);
            if stamp & !self.mark == head + 1 {
                let next = self.next(head);
                match self.head.compare_exchange_weak(
                    head,
                    next,
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    // A hole: claimed, nothing to read; freed at once.
                    Ok(_) if stamp & self.mark != 0 => {
                        slot.stamp
                            .store(head.wrapping_add(self.lap), Ordering::Release);
                        *freed = true;
                        head = next;
                        continue;
                    }
                    Ok(_) => {
                        return Ok(Claim {
                            slot: std::ptr::from_ref(slot).cast(),
                            pos: head,
                        });
                    }
                    Err(now) => {
                        head = now;
                        lost.spin();
                        continue;
                    }
                }
            }
            if stamp == head {
                // Empty, unless a send has claimed the slot and is writing.
                fence(Ordering::SeqCst);
                let tail = self.tail.load(Ordering::Relaxed);
                if tail & !self.mark == head {
                    return Err(if tail & self.mark != 0 {
                        NoClaim::Disconnected
                    } else {
                        NoClaim::NotReady
                    });
                }
                if !wait_for_writers {
                    return Err(NoClaim::NotReady);
                }
            }
            pause.pause();
            head = self.head.load(Ordering::Relaxed);
        }
    }

    fn slot(&self, pos: usize) -> &Slot<T> {
        &self.slots[pos & (self.mark - 1)]
    }

    /// The position after `pos`: the next slot, or the first of the next
    /// lap.
    fn next(&self, pos: usize) -> usize {
        if (pos & (self.mark - 1)) + 1 < self.cap {
            pos + 1
        } else {
            (pos & !(self.lap - 1)).wrapping_add(self.lap)
        }
    }
}

impl<T> Slots for ArraySlots<T> {
    type Message = T;

    #[inline]
    fn start_send(&self, wait_for_readers: bool) -> Result<Claim, NoClaim> {
        // The common case in line: the slot at the tail is free and the
        // tail ours at the first try. The rest takes a frame of its own.
        // (A disconnected tail has the mark bit, which no free slot's
        // stamp has: the slow path reports it.)
        let tail = self.tail.load(Ordering::Relaxed);
        let slot = self.slot(tail);
        if slot.stamp.load(Ordering::Acquire) == tail
            && self
                .tail
                .compare_exchange_weak(tail, self.next(tail), Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        {
            return Ok(Claim {
                slot: std::ptr::from_ref(slot).cast(),
                pos: tail,
            });
        }
        self.start_send_slow(wait_for_readers)
    }

    unsafe fn write(&self, claim: Claim, message: T) {
        let slot = claim.slot.cast::<Slot<T>>();
        // SAFETY: the caller's contract: a slot of this ring that we alone
        // hold until the stamp below publishes it.
        unsafe {
            (*slot)
                .message
                .with_mut(|m| m.write(MaybeUninit::new(message)))
        };
        // SAFETY: as above.
        unsafe { (*slot).stamp.store(claim.pos + 1, Ordering::Release) };
    }

    unsafe fn write_hole(&self, claim: Claim) {
        let slot = claim.slot.cast::<Slot<T>>();
        // SAFETY: as in `write`.
        unsafe {
            (*slot)
                .stamp
                .store((claim.pos + 1) | self.mark, Ordering::Release)
        };
    }

    #[inline]
    fn start_recv(&self, wait_for_writers: bool, freed: &mut bool) -> Result<Claim, NoClaim> {
        // The common case in line, as in `start_send`: a message (not a
        // hole: no mark bit) at the head, and the head ours at once.
        let head = self.head.load(Ordering::Relaxed);
        let slot = self.slot(head);
        if slot.stamp.load(Ordering::Acquire) == head + 1
            && self
                .head
                .compare_exchange_weak(head, self.next(head), Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        {
            return Ok(Claim {
                slot: std::ptr::from_ref(slot).cast(),
                pos: head,
            });
        }
        self.start_recv_slow(wait_for_writers, freed)
    }

    unsafe fn read(&self, claim: Claim) -> T {
        let slot = claim.slot.cast::<Slot<T>>();
        // SAFETY: the caller's contract: a full slot of this ring (its
        // stamp, acquired by `start_recv`, published the message) that we
        // alone hold until the stamp below frees it.
        let message = unsafe { (*slot).message.with(|m| m.read().assume_init()) };
        // SAFETY: as above.
        unsafe {
            (*slot)
                .stamp
                .store(claim.pos.wrapping_add(self.lap), Ordering::Release)
        };
        message
    }

    fn disconnect(&self) -> bool {
        self.tail.fetch_or(self.mark, Ordering::SeqCst) & self.mark == 0
    }

    fn is_drained(&self) -> bool {
        self.tail.load(Ordering::SeqCst) == self.head.load(Ordering::SeqCst)
    }

    fn recv_ready(&self) -> bool {
        let tail = self.tail.load(Ordering::SeqCst);
        tail & self.mark != 0 || tail & !self.mark != self.head.load(Ordering::SeqCst)
    }

    fn send_ready(&self) -> bool {
        let tail = self.tail.load(Ordering::SeqCst);
        tail & self.mark != 0 || self.head.load(Ordering::SeqCst).wrapping_add(self.lap) != tail
    }

    fn is_full(&self) -> bool {
        let tail = self.tail.load(Ordering::SeqCst);
        self.head.load(Ordering::SeqCst).wrapping_add(self.lap) == tail & !self.mark
    }

    fn len(&self) -> usize {
        loop {
            let tail = self.tail.load(Ordering::SeqCst);
            let head = self.head.load(Ordering::SeqCst);
            // A consistent pair: `tail` did not move while `head` was read.
            if self.tail.load(Ordering::SeqCst) != tail {
                continue;
            }
            let (h, t) = (head & (self.mark - 1), tail & (self.mark - 1));
            return if h < t {
                t - h
            } else if h > t {
                self.cap - h + t
            } else if tail & !self.mark == head {
                0
            } else {
                self.cap
            };
        }
    }

    fn capacity(&self) -> Option<usize> {
        Some(self.cap)
    }
}

impl<T> Drop for ArraySlots<T> {
    fn drop(&mut self) {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed) & !self.mark;
        let mut pos = head;
        while pos != tail {
            let next = self.next(pos);
            let slot = &self.slots[pos & (self.mark - 1)];
            // (A hole's stamp has the mark bit too: not equal.)
            if slot.stamp.load(Ordering::Relaxed) == pos + 1 {
                // SAFETY: between head and tail with a full stamp: a
                // message written and never read; nobody else is left.
                unsafe { slot.message.with_mut(|m| (*m).assume_init_drop()) };
            }
            pos = next;
        }
    }
}
