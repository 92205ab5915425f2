//! A `select!` send on a channel of capacity 0 is a rendezvous with one
//! receiver, made before the arm's message exists: the receiver waits for
//! that message, nothing is ever buffered, and a receiver that leaves (a
//! cancel) or a send that is never made (its arm dropped) loses nothing.
//! And `Select::ready` says ready only when the operation can go ahead.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use fibra::channel::{Receiver, Select, Sender, TryRecvError, bounded};

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

/// Selects over rendezvous channels only go straight to registering, and
/// take an operation found ready there: one that becomes ready while an
/// earlier one is being registered races the notifier that chooses the
/// earlier one. Select sends and receives, plain sends and receives, on
/// threads and on fibers of two workers, all on two channels: every
/// message arrives once and exactly one operation of each select
/// completes.
#[test]
fn selects_that_meet_ready_operations_while_registering_complete_one() {
    const EACH: u64 = 4_000; // messages a producer sends
    let (s1, r1) = bounded::<u64>(0);
    let (s2, r2) = bounded::<u64>(0);
    let received = Arc::new(AtomicUsize::new(0));
    let sum = Arc::new(AtomicUsize::new(0));
    // Producer `p` sends `p * EACH + i`: a select send over both, or a
    // plain send to one.
    let produce = |p: u64, s1: Sender<u64>, s2: Sender<u64>| {
        move || {
            for i in 0..EACH {
                let m = p * EACH + i;
                if p.is_multiple_of(2) {
                    fibra::select! {
                        send(s1, m) -> res => res.unwrap(),
                        send(s2, m) -> res => res.unwrap(),
                    }
                } else if i.is_multiple_of(2) {
                    s1.send(m).unwrap();
                } else {
                    s2.send(m).unwrap();
                }
            }
        }
    };
    // Consumers take until both channels are disconnected: a select
    // receive over the open ones, or plain receives from each in turn.
    let consume =
        |c: usize, rs: [Receiver<u64>; 2], received: Arc<AtomicUsize>, sum: Arc<AtomicUsize>| {
            move || {
                let mut open = [true, true];
                let mut turn = 0;
                while open[0] || open[1] {
                    // (channel, message or `Err(disconnected)`)
                    let (i, got) = if c.is_multiple_of(2) {
                        let mut sel = Select::new();
                        let opers: Vec<(usize, usize)> = (0..2)
                            .filter(|&i| open[i])
                            .map(|i| (sel.recv(&rs[i]), i))
                            .collect();
                        let op = sel.select();
                        let i = opers.iter().find(|o| o.0 == op.index()).unwrap().1;
                        (i, op.recv(&rs[i]).map_err(|_| true))
                    } else {
                        turn = (turn + 1) % 2;
                        if !open[turn] {
                            continue;
                        }
                        let got = rs[turn].recv_timeout(MS);
                        (turn, got.map_err(|e| e.is_disconnected()))
                    };
                    match got {
                        Ok(m) => {
                            received.fetch_add(1, Ordering::SeqCst);
                            sum.fetch_add(m as usize, Ordering::SeqCst);
                        }
                        Err(disconnected) => open[i] = !disconnected,
                    }
                }
            }
        };
    const PRODUCERS: u64 = 4; // two on threads, two on fibers
    let threads: Vec<_> = (0..2)
        .map(|p| thread::spawn(produce(p, s1.clone(), s2.clone())))
        .chain((0..2).map(|c| {
            thread::spawn(consume(
                c,
                [r1.clone(), r2.clone()],
                received.clone(),
                sum.clone(),
            ))
        }))
        .collect();
    let rt = fibra::runtime::Builder::new().workers(2).build().unwrap();
    rt.block_on(|| {
        let fibers: Vec<_> = (2..PRODUCERS)
            .map(|p| fibra::spawn(produce(p, s1.clone(), s2.clone())))
            .chain((2..4).map(|c| {
                fibra::spawn(consume(
                    c,
                    [r1.clone(), r2.clone()],
                    received.clone(),
                    sum.clone(),
                ))
            }))
            .collect();
        drop((s1, s2, r1, r2));
        for f in fibers {
            f.join().unwrap();
        }
    });
    for t in threads {
        t.join().unwrap();
    }
    let n = PRODUCERS * EACH;
    assert_eq!(
        received.load(Ordering::SeqCst) as u64,
        n,
        "every message once"
    );
    assert_eq!(
        sum.load(Ordering::SeqCst) as u64,
        n * (n - 1) / 2,
        "the messages sent"
    );
}
