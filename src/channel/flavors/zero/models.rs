//! loom models of the locked flavor (`bounded(0)`, and `sync::mpsc`'s
//! unbounded channel) on plain threads, through the public API: a thread
//! parks through loom (`scheduler/os_thread.rs`), the flavor's lock and
//! every wait's selection word are loom's, so a model runs the hand-over
//! itself — a sender's message written into a parked receiver's packet,
//! its selection finished, its wake-up — and a `select` over two of them.
//! (`sync::mpsc`'s model is in `sync/models.rs`: `sync` stands above.)
//! loom fails a model on a lost wake-up (every thread parked), a message
//! lost or doubled, or a packet read before it was written.
//! (`RUSTFLAGS="--cfg loom" cargo test --release --lib -- loom`.)
//!
//! The lock-free flavors' waits are modelled in
//! `lockfree/models/waits.rs`.

use loom::thread;

use crate::atomic::model;
use crate::channel::{RecvError, bounded};

#[test]
fn loom_zero_a_rendezvous_hands_the_message_over() {
    model(3, || {
        let (s, r) = bounded::<u32>(0);
        let t = thread::spawn(move || s.send(5).unwrap());
        assert_eq!(r.recv(), Ok(5));
        t.join().unwrap();
    });
}

#[test]
fn loom_zero_two_rendezvous_in_order() {
    // The sender's second send waits for the receiver's second receive,
    // wherever the receiver is in its first.
    model(3, || {
        let (s, r) = bounded::<u32>(0);
        let t = thread::spawn(move || {
            s.send(1).unwrap();
            s.send(2).unwrap();
        });
        assert_eq!(r.recv(), Ok(1));
        assert_eq!(r.recv(), Ok(2));
        t.join().unwrap();
    });
}

#[test]
fn loom_zero_a_dropped_sender_wakes_a_blocked_receiver() {
    model(3, || {
        let (s, r) = bounded::<u32>(0);
        let t = thread::spawn(move || drop(s));
        assert_eq!(r.recv(), Err(RecvError));
        t.join().unwrap();
    });
}

#[test]
fn loom_zero_a_blocked_sender_gets_its_message_back_when_the_receiver_goes() {
    model(3, || {
        let (s, r) = bounded::<u32>(0);
        let t = thread::spawn(move || drop(r));
        assert_eq!(s.send(9).map_err(|e| e.into_inner()), Err(9));
        t.join().unwrap();
    });
}

/// A select over two rendezvous channels, each with a sender: it takes
/// one message, and the other is still there for a plain receive. Biased
/// (arms tried in order), both ways round: `select!`'s random order comes
/// from a per-thread generator that loom cannot replay.
fn select_over_two(second_first: bool) {
    model(2, move || {
        let (s1, r1) = bounded::<u32>(0);
        let (s2, r2) = bounded::<u32>(0);
        let a = thread::spawn(move || s1.send(1).is_ok());
        let b = thread::spawn(move || s2.send(2).is_ok());
        let first = if second_first {
            crate::select_biased! {
                recv(r2) -> m => m.unwrap(),
                recv(r1) -> m => m.unwrap(),
            }
        } else {
            crate::select_biased! {
                recv(r1) -> m => m.unwrap(),
                recv(r2) -> m => m.unwrap(),
            }
        };
        let second = if first == 1 { r2.recv() } else { r1.recv() };
        assert_eq!(first + second.unwrap(), 3);
        assert!(a.join().unwrap() && b.join().unwrap());
    });
}

#[test]
fn loom_zero_a_select_takes_one_of_two_rendezvous() {
    select_over_two(false);
}

#[test]
fn loom_zero_a_select_takes_one_of_two_rendezvous_the_other_way_round() {
    select_over_two(true);
}

#[test]
fn loom_zero_a_select_send_meets_a_receive() {
    // A `select!`'s send arm on a rendezvous channel: its message is made
    // only once the send is chosen, and the receiver that paired with it
    // waits for that message (the promise of `promise.rs`).
    model(3, || {
        let (s, r) = bounded::<u32>(0);
        let t = thread::spawn(move || r.recv());
        let sent = crate::select_biased! {
            send(s, 7) -> res => res.is_ok(),
        };
        assert!(sent);
        assert_eq!(t.join().unwrap(), Ok(7));
    });
}
