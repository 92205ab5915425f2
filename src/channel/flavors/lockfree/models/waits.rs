//! loom models of the lock-free flavors' blocking waits through the public
//! API, on plain threads that park through loom: a waiter registers in its
//! side's `SyncWaker` and looks at the positions once more before it
//! parks; a notifier moves a position and then reads the waker's flag
//! (`waker.rs`). loom fails a model on a lost wake-up (every thread
//! parked), and on a message lost or doubled. (The pair is checked with a
//! `SeqCst` fence at its middle under loom, `atomic::dekker_point`: loom
//! sees no total order in `SeqCst` accesses alone.)

use loom::thread;

use crate::atomic::model;
use crate::channel::{Receiver, RecvError, Sender, bounded, unbounded};

/// A receive that finds nothing parks; a send wakes it (or it sees the
/// message before parking).
fn receive_woken_by_a_send(make: fn() -> (Sender<u32>, Receiver<u32>)) {
    model(2, move || {
        let (s, r) = make();
        let t = thread::spawn(move || assert_eq!(r.recv(), Ok(4)));
        s.send(4).unwrap();
        t.join().unwrap();
    });
}

#[test]
fn loom_queue_a_blocked_receive_is_woken_by_a_send_bounded() {
    receive_woken_by_a_send(|| bounded(1));
}

#[test]
fn loom_queue_a_blocked_receive_is_woken_by_a_send_unbounded() {
    receive_woken_by_a_send(unbounded);
}

#[test]
fn loom_queue_a_blocked_send_is_woken_by_a_receive() {
    // The ring is full: the second send parks until the receive makes room.
    model(2, || {
        let (s, r) = bounded::<u32>(1);
        s.send(1).unwrap();
        let t = thread::spawn(move || s.send(2).unwrap());
        assert_eq!(r.recv(), Ok(1));
        t.join().unwrap();
        assert_eq!(r.recv(), Ok(2));
    });
}

#[test]
fn loom_queue_a_disconnect_wakes_a_blocked_receive() {
    model(3, || {
        let (s, r) = unbounded::<u32>();
        let t = thread::spawn(move || assert_eq!(r.recv(), Err(RecvError)));
        drop(s);
        t.join().unwrap();
    });
}

#[test]
fn loom_queue_a_select_is_woken_by_a_send() {
    // A select over two rings parks registered in both lines; a send on
    // either wakes it, and it takes that message.
    model(2, || {
        let (s1, r1) = bounded::<u32>(1);
        let (s2, r2) = unbounded::<u32>();
        let t = thread::spawn(move || {
            let got = crate::select_biased! {
                recv(r2) -> m => m.unwrap(),
                recv(r1) -> m => m.unwrap(),
            };
            assert_eq!(got, 7);
        });
        s1.send(7).unwrap();
        t.join().unwrap();
        drop(s2);
    });
}
