//! A `select!` send on a channel of capacity 0 is a rendezvous with one
//! receiver, made before the arm's message exists: the receiver waits for
//! that message, nothing is ever buffered, and a receiver that leaves (a
//! cancel) or a send that is never made (its arm dropped) loses nothing.
//! And `Select::ready` says ready only when the operation can go ahead.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use fibra::channel::{Select, TryRecvError, bounded};

const MS: Duration = Duration::from_millis(1);

/// The message expression of a select's send receives from the same
/// channel: the receiver that chose the send waits for it, and the receive
/// inside the expression is served by a third party.
#[test]
fn a_receive_inside_the_send_expression_is_served_by_another_sender() {
    let (s, r) = bounded::<u32>(0);
    let (s2, r2) = (s.clone(), r.clone());
    let paired = thread::spawn(move || {
        thread::sleep(50 * MS);
        r2.recv().unwrap()
    });
    let third = thread::spawn(move || {
        thread::sleep(300 * MS);
        s2.send(7).unwrap();
    });
    fibra::select! {
        send(s, r.recv().unwrap() * 10) -> res => res.unwrap(),
    }
    assert_eq!(paired.join().unwrap(), 70);
    third.join().unwrap();
}

/// The same between fibers of one thread: the receive inside the arm parks
/// the fiber that made the select, and the paired receiver stays parked
/// until the arm's message comes.
#[test]
fn rendezvous_between_fibers_of_one_thread() {
    fibra::run(|| {
        let (s, r) = bounded::<u32>(0);
        let (s2, r2) = (s.clone(), r.clone());
        let paired = fibra::spawn(move || {
            fibra::sleep(20 * MS);
            r2.recv().unwrap()
        });
        let third = fibra::spawn(move || {
            fibra::sleep(100 * MS);
            s2.send(4).unwrap();
        });
        fibra::select! {
            send(s, r.recv().unwrap() + 1) -> res => res.unwrap(),
        }
        assert_eq!(paired.join().unwrap(), 5);
        third.join().unwrap();
    });
}

/// A select never receives what its own earlier select sent, and a
/// capacity-0 channel holds nothing after a send was paired.
#[test]
fn nothing_is_buffered_in_a_rendezvous_channel() {
    let (s, r) = bounded::<u32>(0);
    let r2 = r.clone();
    let taker = thread::spawn(move || {
        let mut got = Vec::new();
        for _ in 0..1000 {
            got.push(r2.recv().unwrap());
        }
        got
    });
    let mut sent = 0;
    while sent < 1000 {
        fibra::select! {
            send(s, sent) -> res => { res.unwrap(); sent += 1; }
            recv(r) -> msg => panic!("received our own message {msg:?}"),
        }
        assert_eq!(r.try_recv(), Err(TryRecvError::Empty));
    }
    assert_eq!(taker.join().unwrap(), (0..1000).collect::<Vec<_>>());
}

/// `try_recv` takes the message of a select waiting to send (it waits the
/// moment the arm takes to make it).
#[test]
fn try_recv_takes_from_a_waiting_select_send() {
    let (s, r) = bounded::<&str>(0);
    let sender = thread::spawn(move || {
        fibra::select! {
            send(s, "made after the pairing") -> res => res.unwrap(),
        }
    });
    let got = loop {
        match r.try_recv() {
            Ok(m) => break m,
            Err(TryRecvError::Empty) => thread::sleep(MS),
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(got, "made after the pairing");
    sender.join().unwrap();
}

/// A receiver paired with a select's send is cancelled while the arm makes
/// the message: the message goes to the next receiver, not lost.
#[test]
fn a_cancelled_paired_receiver_passes_the_message_on() {
    fibra::run(|| {
        let (s, r) = bounded::<u32>(0);
        let (gate_s, gate_r) = bounded::<()>(0);
        let r1 = r.clone();
        let first = fibra::spawn(move || r1.recv());
        fibra::sleep(10 * MS); // `first` waits in recv
        let maker = fibra::spawn(move || {
            fibra::select! {
                // Paired with `first` at once; the message waits for the gate.
                send(s, { gate_r.recv().unwrap(); 99 }) -> res => res.unwrap(),
            }
        });
        fibra::sleep(10 * MS);
        first.cancel();
        assert!(first.join().is_err(), "cancelled while paired");
        gate_s.send(()).unwrap();
        maker.join().unwrap();
        assert_eq!(r.recv_timeout(1000 * MS), Ok(99));
    });
}

/// A select's send that is chosen but never completed (its
/// `SelectedOperation` dropped) releases its paired receiver, which goes
/// back to waiting and takes the next message.
#[test]
fn a_dropped_selected_send_releases_its_receiver() {
    let (s, r) = bounded::<u32>(0);
    let r2 = r.clone();
    let receiver = thread::spawn(move || r2.recv().unwrap());
    thread::sleep(20 * MS);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut sel = Select::new();
        sel.send(&s);
        let oper = sel.select();
        drop(oper); // panics: not completed
    }));
    assert!(dropped.is_err());
    s.send(5).unwrap();
    assert_eq!(receiver.join().unwrap(), 5);
}

/// `ready` on a receive of a capacity-0 channel answers only once a sender
/// waits there: a sender that only tries (`try_send`) does not make it.
#[test]
fn ready_is_not_woken_by_a_failed_try() {
    let (s, r) = bounded::<u32>(0);
    let woken = Arc::new(AtomicUsize::new(0));
    let w = woken.clone();
    let watcher = thread::spawn(move || {
        let mut sel = Select::new();
        sel.recv(&r);
        sel.ready();
        w.fetch_add(1, Ordering::SeqCst);
        r.try_recv()
    });
    thread::sleep(50 * MS);
    for _ in 0..100 {
        assert!(s.try_send(1).is_err());
    }
    thread::sleep(50 * MS);
    assert_eq!(
        woken.load(Ordering::SeqCst),
        0,
        "ready before any sender waited"
    );
    s.send(8).unwrap();
    assert_eq!(watcher.join().unwrap(), Ok(8));
}

/// `try_select` sees an operation that was ready at every moment, though
/// the one it looked at first was emptied meanwhile: a thousand rounds.
#[test]
fn try_select_does_not_miss_an_always_ready_pair() {
    let (s1, r1) = bounded::<u8>(1);
    let (s2, r2) = bounded::<u8>(1);
    let (go_s, go_r) = bounded::<()>(0);
    let (done_s, done_r) = bounded::<()>(0);
    let r1b = r1.clone();
    let other = thread::spawn(move || {
        for _ in 0..1000 {
            go_r.recv().unwrap();
            s2.send(2).unwrap();
            let _ = r1b.try_recv();
            done_r.recv().unwrap();
        }
    });
    for _ in 0..1000 {
        s1.send(1).unwrap();
        go_s.send(()).unwrap();
        let mut sel = Select::new();
        let a = sel.recv(&r1);
        let b = sel.recv(&r2);
        let oper = sel.try_select().expect("one of the two holds a message");
        match oper.index() {
            i if i == a => assert_eq!(oper.recv(&r1), Ok(1)),
            i if i == b => assert_eq!(oper.recv(&r2), Ok(2)),
            _ => unreachable!(),
        }
        done_s.send(()).unwrap();
        let _ = r2.try_recv();
        let _ = r1.try_recv();
    }
    other.join().unwrap();
}

/// A select's waits on rendezvous channels keep their slots in place,
/// inline when small and boxed when not: messages of both sizes cross
/// selects waiting on both sides, and those a chosen receive could not
/// keep (its operation dropped) go back; each is dropped once.
#[test]
fn small_and_large_messages_cross_waiting_selects_and_drop_once() {
    struct Big([u64; 16], Arc<AtomicUsize>);
    impl Drop for Big {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }
    const ROUNDS: u64 = 200;
    let drops = Arc::new(AtomicUsize::new(0));
    let big_sent = Arc::new(AtomicUsize::new(0));
    fibra::run({
        let (drops, big_sent) = (drops.clone(), big_sent.clone());
        move || {
            let (big_s, big_r) = bounded::<Big>(0);
            let (small_s, small_r) = bounded::<u64>(0);
            let sender = {
                let (big_s, small_s) = (big_s.clone(), small_s.clone());
                let (drops, big_sent) = (drops.clone(), big_sent.clone());
                fibra::spawn(move || {
                    for i in 0..ROUNDS {
                        // Waits (the receiver is not there yet) on both.
                        fibra::select! {
                            send(big_s, Big([i; 16], drops.clone())) -> res => {
                                res.unwrap();
                                big_sent.fetch_add(1, Ordering::SeqCst);
                            }
                            send(small_s, i) -> res => res.unwrap(),
                        }
                    }
                })
            };
            let mut sum = 0;
            for round in 0..ROUNDS {
                fibra::yield_now(); // the sender waits now
                if round % 10 == 9 {
                    // Chosen and dropped: the message goes back to the
                    // channel's next receiver, this loop's next select.
                    let mut sel = Select::new();
                    sel.recv(&big_r);
                    sel.recv(&small_r);
                    let op = sel.select();
                    let dropped =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(op)));
                    assert!(dropped.is_err(), "an uncompleted operation panics");
                }
                sum += fibra::select! {
                    recv(big_r) -> m => m.unwrap().0[15],
                    recv(small_r) -> m => m.unwrap(),
                };
            }
            sender.join().unwrap();
            assert_eq!(sum, ROUNDS * (ROUNDS - 1) / 2, "every message once");
        }
    });
    let sent = big_sent.load(Ordering::SeqCst);
    assert!(sent > 0, "some large messages crossed");
    assert_eq!(drops.load(Ordering::SeqCst), sent, "each dropped once");
}
