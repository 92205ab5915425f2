//! The ring's models (`bounded(n)`): see `models/mod.rs`.

use loom::sync::Arc;
use loom::thread;

use super::{claim_send, model, recv, send};
use crate::channel::flavors::lockfree::{ArraySlots, NoClaim, Slots};

#[test]
fn loom_ring_spsc_messages_cross_once_in_order() {
    model(3, || {
        let ring = Arc::new(ArraySlots::new(1));
        let sender = ring.clone();
        let t = thread::spawn(move || {
            assert!(send(&*sender, 1));
            assert!(send(&*sender, 2));
        });
        assert_eq!(recv(&*ring), Some(1));
        assert_eq!(recv(&*ring), Some(2));
        t.join().unwrap();
    });
}

#[test]
fn loom_ring_two_senders_each_message_once() {
    // Room for both: the senders race for positions, not for room.
    model(2, || {
        let ring = Arc::new(ArraySlots::new(2));
        let threads: Vec<_> = [10, 20]
            .into_iter()
            .map(|v| {
                let ring = ring.clone();
                thread::spawn(move || assert!(send(&*ring, v)))
            })
            .collect();
        let mut got = [recv(&*ring).unwrap(), recv(&*ring).unwrap()];
        got.sort_unstable();
        assert_eq!(got, [10, 20]);
        for t in threads {
            t.join().unwrap();
        }
    });
}

#[test]
fn loom_ring_disconnect_is_final() {
    model(3, || {
        let ring = Arc::new(ArraySlots::new(2));
        let sender = ring.clone();
        let t = thread::spawn(move || {
            assert!(send(&*sender, 1));
            sender.disconnect();
            // A send after the disconnect is refused.
            assert!(!send(&*sender, 2));
        });
        // The message sent before the disconnect arrives; then the
        // end, and the end stays.
        assert_eq!(recv(&*ring), Some(1));
        assert_eq!(recv(&*ring), None);
        let mut freed = false;
        assert_eq!(
            ring.start_recv(false, &mut freed).err(),
            Some(NoClaim::Disconnected)
        );
        t.join().unwrap();
    });
}

#[test]
fn loom_ring_a_hole_is_passed_over() {
    model(3, || {
        let ring = Arc::new(ArraySlots::new(2));
        let sender = ring.clone();
        let t = thread::spawn(move || {
            // A claimed send that writes nothing (a select's send arm
            // whose expression panicked), then a real one.
            let claim = claim_send(&*sender).unwrap();
            // SAFETY: a claim of this ring, made for this send.
            unsafe { sender.write_hole(claim) };
            assert!(send(&*sender, 7));
        });
        assert_eq!(recv(&*ring), Some(7));
        t.join().unwrap();
    });
}

#[test]
fn loom_ring_a_full_ring_frees_a_slot_for_the_next_lap() {
    model(3, || {
        let ring = Arc::new(ArraySlots::new(1));
        let receiver = ring.clone();
        assert!(send(&*ring, 1));
        let t = thread::spawn(move || recv(&*receiver));
        // Full until the receive frees the slot; then the next lap.
        assert!(send(&*ring, 2));
        assert_eq!(t.join().unwrap(), Some(1));
        assert_eq!(recv(&*ring), Some(2));
    });
}

#[test]
fn loom_ring_two_receivers_each_message_once() {
    // Both messages are in before the receivers race for them: each is
    // taken by one receiver, and the ring is empty after.
    model(2, || {
        let ring = Arc::new(ArraySlots::new(2));
        assert!(send(&*ring, 1));
        assert!(send(&*ring, 2));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let ring = ring.clone();
                thread::spawn(move || recv(&*ring).unwrap())
            })
            .collect();
        let mut got: Vec<u32> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
        assert!(ring.is_drained());
    });
}

#[test]
fn loom_ring_len_stays_within_capacity() {
    // Looked at while a sender and a receiver move the ring on: the count
    // is never more than the capacity (nor a wrapped negative).
    model(2, || {
        let ring = Arc::new(ArraySlots::new(2));
        let sender = ring.clone();
        let t = thread::spawn(move || {
            assert!(send(&*sender, 1));
            assert!(send(&*sender, 2));
            assert!(send(&*sender, 3));
        });
        for want in 1..=3 {
            assert!(ring.len() <= 2);
            assert_eq!(recv(&*ring), Some(want));
        }
        t.join().unwrap();
        assert_eq!(ring.len(), 0);
    });
}

#[test]
fn loom_ring_a_receive_waits_out_a_claimed_send() {
    // A send that has claimed its slot and not yet written it: a receive
    // that waits for writers meets the slot and waits, then gets the
    // message; it is never told the ring is empty past a claim it saw.
    model(3, || {
        let ring = Arc::new(ArraySlots::new(1));
        let sender = ring.clone();
        let t = thread::spawn(move || {
            let claim = claim_send(&*sender).unwrap();
            // SAFETY: a claim of this ring, made for this send.
            unsafe { sender.write(claim, 5) };
        });
        assert_eq!(recv(&*ring), Some(5));
        t.join().unwrap();
    });
}
