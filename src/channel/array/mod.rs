//! The channel behind `bounded(n)` for n ≥ 1: a ring of `n` slots and no
//! lock (Dmitry Vyukov's bounded queue, as crossbeam-channel's `array`
//! flavor), with a [`Line`] of waiters per side that only a wait takes.
//!
//! # The ring
//!
//! `head` and `tail` are positions: a slot index in the low bits, a lap
//! count above them, and in `tail` a mark bit between the two that says the
//! channel is disconnected. Each slot has a stamp, the position it is
//! ready for:
//!
//! - stamp = position: empty, ready for a send at that position;
//! - stamp = position + 1: holds the message sent at that position, ready
//!   for a receive;
//! - stamp = position + one lap: read, ready for the send of the next lap.
//!
//! A send claims the slot at `tail` by moving `tail` on (compare-exchange)
//! when the slot's stamp says it is empty, writes the message, then
//! publishes it with the stamp (release). A receive claims the slot at
//! `head` the same way when the stamp says it is full, reads, and frees the
//! slot for the next lap with the stamp. A claim and its completion are
//! two steps a `select` takes apart (its token holds the claim): a
//! `select!` arm's send makes its message only once the send is chosen.
//! Another party that meets a claimed slot not yet completed waits for it
//! ([`Pause`]).
//!
//! A claimed send that is never completed (the arm unwound, the
//! `SelectedOperation` was dropped) writes a *hole*: the stamp says full,
//! and a receive that claims a hole frees it and looks again. A claimed
//! receive never completed gives its message back (`returned`), ahead of
//! the ring: the message is not lost, and its order among the others is
//! what it would have been had the receiver taken it and sent it back.
//!
//! # Waiting
//!
//! A send that finds the ring full, or a receive that finds it empty,
//! registers in the line of its side, looks once more, and parks; every
//! completed move notifies the other side's line, which wakes one waiter
//! to try again (and every `ready` watcher). A waiter woken that cannot
//! use its turn because it unwinds passes it on.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering, fence};

use crate::channel::backoff::Pause;
use crate::channel::chan::drop_one_by_one;
use crate::channel::line::Line;

mod ops;

pub(crate) struct Array<T> {
    head: Padded<AtomicUsize>,
    tail: Padded<AtomicUsize>,
    slots: Box<[Slot<T>]>,
    cap: usize,
    /// The disconnected bit of `tail`; the slot index is below it.
    mark: usize,
    /// One lap: the lap count sits above `mark`.
    lap: usize,
    /// Messages given back by a `select` that took and could not use them,
    /// received before the ring's.
    returned: Mutex<VecDeque<T>>,
    returned_len: AtomicUsize,
    pub(crate) receivers_line: Line,
    pub(crate) senders_line: Line,
    pub(crate) senders: AtomicUsize,
    pub(crate) receivers: AtomicUsize,
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
    stamp: AtomicUsize,
    /// A send claimed this slot and wrote nothing (see the module docs).
    /// Written before the stamp that publishes the slot, read after it.
    hole: UnsafeCell<bool>,
    message: UnsafeCell<MaybeUninit<T>>,
}

/// A slot claimed at a position: to write (a send) or read (a receive).
/// Valid while its channel is, completed at most once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Claim {
    slot: *const (),
    pos: usize,
}

/// Why a claim could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoClaim {
    /// Full (a send) or empty (a receive).
    NotReady,
    Disconnected,
}

// SAFETY: the slots' messages move between threads only through a claim,
// which one party holds at a time (the stamps order the hand-over with
// release and acquire): like a `Mutex<T>`, `Send` for `T: Send`.
unsafe impl<T: Send> Send for Array<T> {}
// SAFETY: as above; `&Array` hands messages out only through claims.
unsafe impl<T: Send> Sync for Array<T> {}

/// The most bytes of slots a channel allocates up front; a larger
/// `bounded(n)` takes the locked channel, which grows as it fills.
pub(crate) const MAX_RING_BYTES: usize = 64 << 20;

impl<T> Array<T> {
    /// Whether a ring of `cap` slots of `T` fits [`MAX_RING_BYTES`].
    pub(crate) fn fits(cap: usize) -> bool {
        cap >= 1
            && cap
                .checked_mul(std::mem::size_of::<Slot<T>>())
                .is_some_and(|b| b <= MAX_RING_BYTES)
    }

    pub(crate) fn new(cap: usize) -> Array<T> {
        assert!(Self::fits(cap), "a ring of {cap} slots");
        let mark = (cap + 1).next_power_of_two();
        let slots = (0..cap)
            .map(|i| Slot {
                stamp: AtomicUsize::new(i),
                hole: UnsafeCell::new(false),
                message: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect();
        Array {
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
            slots,
            cap,
            mark,
            lap: mark * 2,
            returned: Mutex::new(VecDeque::new()),
            returned_len: AtomicUsize::new(0),
            receivers_line: Line::new(),
            senders_line: Line::new(),
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
        }
    }

    pub(crate) fn capacity(&self) -> Option<usize> {
        Some(self.cap)
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

    /// Claims the slot at the tail for a send. `wait_for_readers`: a slot
    /// a receive claimed and is still reading is waited for; otherwise it
    /// ends the search as `NotReady` (a caller that must not wait: one
    /// between `claim` and `finish` of a waiter's context).
    pub(crate) fn start_send(&self, wait_for_readers: bool) -> Result<Claim, NoClaim> {
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
                        std::hint::spin_loop();
                        continue;
                    }
                }
            }
            if stamp.wrapping_add(self.lap) == tail + 1 {
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
                std::hint::spin_loop();
            }
            tail = self.tail.load(Ordering::Relaxed);
        }
    }

    /// Writes `message` into a slot claimed for a send, and tells the
    /// receivers.
    ///
    /// # Safety
    ///
    /// `claim` was made by this channel's [`Array::start_send`] and is
    /// completed here for the first and only time.
    pub(crate) unsafe fn write(&self, claim: Claim, message: T) {
        let slot = claim.slot.cast::<Slot<T>>();
        // SAFETY: the caller's contract: a slot of this ring that we alone
        // hold until the stamp below publishes it.
        unsafe { (*slot).message.get().write(MaybeUninit::new(message)) };
        // SAFETY: as above.
        unsafe { (*slot).stamp.store(claim.pos + 1, Ordering::Release) };
        self.receivers_line.notify();
    }

    /// Completes a claimed send without a message: a hole that receives
    /// pass over.
    ///
    /// # Safety
    ///
    /// As for [`Array::write`].
    pub(crate) unsafe fn write_hole(&self, claim: Claim) {
        let slot = claim.slot.cast::<Slot<T>>();
        // SAFETY: as in `write`.
        unsafe { *(*slot).hole.get() = true };
        // SAFETY: as in `write`.
        unsafe { (*slot).stamp.store(claim.pos + 1, Ordering::Release) };
    }

    /// Claims the slot at the head for a receive (passing over holes).
    /// `wait_for_writers`: a slot claimed by a send not yet written is
    /// waited for; otherwise it ends the search as `NotReady`.
    pub(crate) fn start_recv(&self, wait_for_writers: bool) -> Result<Claim, NoClaim> {
        let mut pause = Pause::default();
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let slot = self.slot(head);
            let stamp = slot.stamp.load(Ordering::Acquire);
            if stamp == head + 1 {
                let next = self.next(head);
                match self.head.compare_exchange_weak(
                    head,
                    next,
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    // SAFETY: claimed: the slot is ours until we free it,
                    // and its stamp (acquire) published its hole flag.
                    Ok(_) if unsafe { *slot.hole.get() } => {
                        // SAFETY: as above.
                        unsafe { *slot.hole.get() = false };
                        slot.stamp
                            .store(head.wrapping_add(self.lap), Ordering::Release);
                        self.room_made();
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
                        std::hint::spin_loop();
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

    /// Reads the message of a slot claimed for a receive, frees the slot
    /// and tells the senders.
    ///
    /// # Safety
    ///
    /// `claim` was made by this channel's [`Array::start_recv`] and is
    /// completed here for the first and only time.
    pub(crate) unsafe fn read(&self, claim: Claim) -> T {
        let slot = claim.slot.cast::<Slot<T>>();
        // SAFETY: the caller's contract: a full slot of this ring (its
        // stamp, acquired by `start_recv`, published the message) that we
        // alone hold until the stamp below frees it.
        let message = unsafe { (*slot).message.get().read().assume_init() };
        // SAFETY: as above.
        unsafe {
            (*slot)
                .stamp
                .store(claim.pos.wrapping_add(self.lap), Ordering::Release)
        };
        self.room_made();
        message
    }

    /// A message given back, if any (ahead of the ring's).
    pub(crate) fn take_returned(&self) -> Option<T> {
        if self.returned_len.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut returned = self.returned.lock().unwrap_or_else(|e| e.into_inner());
        let message = returned.pop_front()?;
        self.returned_len.store(returned.len(), Ordering::SeqCst);
        Some(message)
    }

    /// Gives back a message a receive took and cannot use; `Err` with it
    /// when every receiver is gone.
    pub(crate) fn give_back(&self, message: T) -> Result<(), T> {
        // Nothing is handed to a waiting receiver while `returned` holds a
        // message (`is_drained`), so no one waits for this one: notified,
        // a waiter tries again and finds it.
        if self.receivers.load(Ordering::Acquire) == 0 {
            return Err(message);
        }
        {
            let mut returned = self.returned.lock().unwrap_or_else(|e| e.into_inner());
            returned.push_back(message);
            self.returned_len.store(returned.len(), Ordering::SeqCst);
        }
        self.receivers_line.notify();
        Ok(())
    }

    /// Whether the ring is empty and nothing was given back (a message
    /// may be handed straight to a waiting receiver); false once
    /// disconnected.
    fn is_drained(&self) -> bool {
        self.returned_len.load(Ordering::SeqCst) == 0
            && self.tail.load(Ordering::SeqCst) == self.head.load(Ordering::SeqCst)
    }

    /// Whether a receive would find something (or the disconnection).
    pub(crate) fn recv_ready(&self) -> bool {
        let tail = self.tail.load(Ordering::SeqCst);
        self.returned_len.load(Ordering::SeqCst) != 0
            || tail & self.mark != 0
            || tail & !self.mark != self.head.load(Ordering::SeqCst)
    }

    /// Whether a send would find room (or the disconnection).
    pub(crate) fn send_ready(&self) -> bool {
        let tail = self.tail.load(Ordering::SeqCst);
        tail & self.mark != 0 || self.head.load(Ordering::SeqCst).wrapping_add(self.lap) != tail
    }

    pub(crate) fn is_full(&self) -> bool {
        let tail = self.tail.load(Ordering::SeqCst);
        self.head.load(Ordering::SeqCst).wrapping_add(self.lap) == tail & !self.mark
    }

    /// Messages in the ring (claimed ones included) and given back.
    pub(crate) fn len(&self) -> usize {
        let returned = self.returned_len.load(Ordering::SeqCst);
        loop {
            let tail = self.tail.load(Ordering::SeqCst);
            let head = self.head.load(Ordering::SeqCst);
            // A consistent pair: `tail` did not move while `head` was read.
            if self.tail.load(Ordering::SeqCst) != tail {
                continue;
            }
            let (h, t) = (head & (self.mark - 1), tail & (self.mark - 1));
            let ring = if h < t {
                t - h
            } else if h > t {
                self.cap - h + t
            } else if tail & !self.mark == head {
                0
            } else {
                self.cap
            };
            return ring + returned;
        }
    }

    /// Every sender (`receivers_gone` false) or every receiver is gone:
    /// marks the tail, wakes every waiter; with no receivers left, drops
    /// the messages that can be taken now (a slot still being written is
    /// left, with what follows, to the channel's drop).
    pub(crate) fn disconnect(&self, receivers_gone: bool) {
        let tail = self.tail.fetch_or(self.mark, Ordering::SeqCst);
        if tail & self.mark == 0 {
            self.senders_line.disconnect();
            self.receivers_line.disconnect();
        }
        if receivers_gone {
            let mut dropped: VecDeque<T> =
                std::mem::take(&mut *self.returned.lock().unwrap_or_else(|e| e.into_inner()));
            self.returned_len.store(0, Ordering::SeqCst);
            while let Ok(claim) = self.start_recv(false) {
                // SAFETY: claimed just now from this ring.
                dropped.push_back(unsafe { self.read(claim) });
            }
            drop_one_by_one(dropped);
        }
    }
}

impl<T> Drop for Array<T> {
    fn drop(&mut self) {
        let head = *self.head.0.get_mut();
        let tail = *self.tail.0.get_mut() & !self.mark;
        let mut pos = head;
        while pos != tail {
            let next = self.next(pos);
            let slot = &mut self.slots[pos & (self.mark - 1)];
            if *slot.stamp.get_mut() == pos + 1 && !*slot.hole.get_mut() {
                // SAFETY: between head and tail with a full stamp: a
                // message written and never read; nobody else is left.
                unsafe { slot.message.get_mut().assume_init_drop() };
            }
            pos = next;
        }
    }
}
