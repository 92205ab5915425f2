//! The list's models (`unbounded()`), with blocks of three slots (`LAP` is
//! 4 under loom), so that a handful of messages crosses a block: the next
//! block's install by the sender of a block's last slot, the head's move
//! by its receiver, and the block's free by its last reader. loom tracks
//! each block's allocation: one freed twice or never fails the model.
//! See `models/mod.rs`.

use loom::sync::Arc;
use loom::thread;

use super::{claim_send, model, recv, recv_with, send};
use crate::channel::flavors::lockfree::{ListSlots, NoClaim, Slots};

/// A list holding `values`, sent before any other thread runs.
fn list_of(values: &[u32]) -> Arc<ListSlots<u32>> {
    let list = Arc::new(ListSlots::new());
    for &v in values {
        assert!(send(&*list, v));
    }
    list
}

#[test]
fn loom_list_spsc_in_order_across_a_block() {
    // Four messages: three fill the first block, the fourth is the
    // second block's first (its sender installs it, racing the receiver
    // that moves the head past the marker).
    model(2, || {
        let list = Arc::new(ListSlots::new());
        let sender = list.clone();
        let t = thread::spawn(move || {
            for v in 1..=4 {
                assert!(send(&*sender, v));
            }
        });
        for want in 1..=4 {
            assert_eq!(recv(&*list), Some(want));
        }
        t.join().unwrap();
        assert!(list.is_drained());
    });
}

#[test]
fn loom_list_first_block_installed_once() {
    // Two first sends race to install the first block: one wins, the
    // other's block is freed (loom's tracking says if it leaks), and both
    // messages arrive.
    model(3, || {
        let list = Arc::new(ListSlots::new());
        let other = list.clone();
        let t = thread::spawn(move || assert!(send(&*other, 20)));
        assert!(send(&*list, 10));
        t.join().unwrap();
        let mut got = [recv(&*list).unwrap(), recv(&*list).unwrap()];
        got.sort_unstable();
        assert_eq!(got, [10, 20]);
    });
}

#[test]
fn loom_list_two_senders_race_for_a_blocks_last_slot() {
    // The first block has one slot left: one sender takes it and installs
    // the next block; the other meets the marker and waits for that
    // install, then takes the next block's first slot.
    model(3, || {
        let list = list_of(&[1, 2]);
        let other = list.clone();
        let t = thread::spawn(move || assert!(send(&*other, 20)));
        assert!(send(&*list, 10));
        t.join().unwrap();
        assert_eq!(recv(&*list), Some(1));
        assert_eq!(recv(&*list), Some(2));
        let mut got = [recv(&*list).unwrap(), recv(&*list).unwrap()];
        got.sort_unstable();
        assert_eq!(got, [10, 20]);
    });
}

#[test]
fn loom_list_two_receivers_free_a_block_once() {
    // Two receivers read a full block and the next's first message
    // together: whichever order their reads end in, the first block is
    // freed exactly once (the reader of its last slot, or the last of the
    // earlier slots' readers it asked), and every message is taken once.
    model(2, || {
        let list = list_of(&[1, 2, 3, 4]);
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let list = list.clone();
                thread::spawn(move || [recv(&*list).unwrap(), recv(&*list).unwrap()])
            })
            .collect();
        let mut got: Vec<u32> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, [1, 2, 3, 4]);
        assert!(list.is_drained());
    });
}

#[test]
fn loom_list_disconnect_is_final() {
    model(3, || {
        let list = Arc::new(ListSlots::new());
        let sender = list.clone();
        let t = thread::spawn(move || {
            assert!(send(&*sender, 1));
            assert!(sender.disconnect());
            // A send after the disconnect is refused.
            assert!(!send(&*sender, 2));
        });
        assert_eq!(recv(&*list), Some(1));
        assert_eq!(recv(&*list), None);
        let mut freed = false;
        assert_eq!(
            list.start_recv(true, &mut freed).err(),
            Some(NoClaim::Disconnected)
        );
        t.join().unwrap();
    });
}

#[test]
fn loom_list_a_hole_in_a_blocks_last_slot_is_passed_over() {
    // The block's last slot is claimed and left a hole (a select's send
    // arm that unwound): its claim still installs the next block, the
    // receiver frees the hole's slot (and with it the block) and goes on
    // to the next block's message.
    model(2, || {
        let list = list_of(&[1, 2]);
        let sender = list.clone();
        let t = thread::spawn(move || {
            let claim = claim_send(&*sender).unwrap();
            // SAFETY: a claim of this list, made for this send.
            unsafe { sender.write_hole(claim) };
            assert!(send(&*sender, 7));
        });
        assert_eq!(recv(&*list), Some(1));
        assert_eq!(recv(&*list), Some(2));
        assert_eq!(recv(&*list), Some(7));
        t.join().unwrap();
    });
}

#[test]
fn loom_list_the_last_receiver_drains_without_waiting() {
    // The last receiver, dropping, drains with `wait_for_writers` false:
    // it takes only what is written and never waits on a claim, while a
    // sender goes on writing. What it took and what is left are, together,
    // every message, once.
    model(2, || {
        let list = Arc::new(ListSlots::new());
        let sender = list.clone();
        let t = thread::spawn(move || {
            for v in 1..=3 {
                assert!(send(&*sender, v));
            }
        });
        let mut got = Vec::new();
        let mut freed = false;
        while let Ok(claim) = list.start_recv(false, &mut freed) {
            // SAFETY: a claim of this list, made for this receive.
            got.push(unsafe { list.read(claim) });
        }
        t.join().unwrap();
        while got.len() < 3 {
            got.push(recv_with(&*list, false).unwrap());
        }
        assert_eq!(got, [1, 2, 3]);
    });
}

#[test]
fn loom_list_len_counts_what_is_in() {
    // Looked at while a sender crosses a block and a receiver follows:
    // never more than was sent, and none once all is read.
    model(2, || {
        let list = Arc::new(ListSlots::new());
        let sender = list.clone();
        let t = thread::spawn(move || {
            for v in 1..=4 {
                assert!(send(&*sender, v));
            }
        });
        for want in 1..=4 {
            assert!(list.len() <= 4);
            assert_eq!(recv(&*list), Some(want));
        }
        t.join().unwrap();
        assert_eq!(list.len(), 0);
    });
}

#[test]
fn loom_list_dropped_with_messages_frees_every_block() {
    // Messages left in a list that is dropped: each is dropped with it,
    // and each block freed (loom's tracking fails the model otherwise),
    // whichever thread drops it last.
    model(3, || {
        let list = list_of(&[1, 2]);
        let sender = list.clone();
        let t = thread::spawn(move || {
            assert!(send(&*sender, 3));
            assert!(send(&*sender, 4));
        });
        assert_eq!(recv(&*list), Some(1));
        drop(list);
        t.join().unwrap();
    });
}
