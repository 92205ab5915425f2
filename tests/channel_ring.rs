//! A buffered channel (`bounded(n)`, n ≥ 1) is a ring without a lock, and
//! an unbounded one a list of blocks without a lock, where a `select`
//! claims a slot and completes it later: what it claims and does
//! not complete is not lost and does not block the others, a party that
//! meets a claimed slot waits for it without holding its thread, and a
//! waiter woken for a turn it cannot take passes the turn on; a waiter
//! served before a cancel lands keeps what it was served.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fibra::channel::{Receiver, Select, Sender, TryRecvError, bounded};

const MS: Duration = Duration::from_millis(1);

/// Drops a selected operation without completing it: it gives back what
/// it holds, then panics (as crossbeam's does) to say so.
fn drop_uncompleted(op: fibra::channel::SelectedOperation<'_>) {
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(op)));
    assert!(dropped.is_err(), "dropping an uncompleted operation panics");
}

/// A select's send chosen and then dropped leaves a hole: receivers pass
/// over it, and its room comes back.
#[test]
fn a_send_chosen_and_dropped_leaves_no_message_and_gives_its_room_back() {
    let (s, r) = bounded::<u32>(2);
    s.send(1).unwrap();
    {
        let mut sel = Select::new();
        sel.send(&s);
        let op = sel.try_select().expect("room for one more");
        drop_uncompleted(op); // the arm never made its message
    }
    assert_eq!(r.recv().unwrap(), 1);
    assert_eq!(r.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(r.len(), 0);
    // Both slots are free again.
    s.try_send(2).unwrap();
    s.try_send(3).unwrap();
    assert!(s.is_full());
    assert_eq!((r.recv().unwrap(), r.recv().unwrap()), (2, 3));
}

/// A select's receive chosen and then dropped gives its message back: the
/// next receive gets it, before the others.
#[test]
fn a_receive_chosen_and_dropped_gives_its_message_back_first() {
    let (s, r) = bounded::<u32>(4);
    for i in 1..=3 {
        s.send(i).unwrap();
    }
    {
        let mut sel = Select::new();
        sel.recv(&r);
        let op = sel.select();
        drop_uncompleted(op);
    }
    assert_eq!(r.len(), 3);
    let got: Vec<u32> = (0..3).map(|_| r.recv().unwrap()).collect();
    assert_eq!(got, [1, 2, 3]);
}

/// The message expression of a select's send waits (parks its fiber) after
/// the send claimed a slot; a receiver fiber of the same thread that meets
/// the claimed slot lets it run, and gets the message once made.
#[test]
fn a_receiver_meeting_a_slot_being_written_lets_the_writer_run() {
    writer_met_by_a_receiver(|| bounded(1));
}

/// The body of the test above, for a channel made by `make`.
fn writer_met_by_a_receiver(make: fn() -> (Sender<u32>, Receiver<u32>)) {
    fibra::run(move || {
        let (s, r) = make();
        let receiver = fibra::spawn(move || r.recv().unwrap());
        let (gate_s, gate_r) = make();
        let gate = fibra::spawn(move || {
            fibra::sleep(30 * MS);
            gate_s.send(41).unwrap();
        });
        fibra::select! {
            send(s, gate_r.recv().unwrap() + 1) -> res => res.unwrap(),
        }
        assert_eq!(receiver.join().unwrap(), 42);
        gate.join().unwrap();
    });
}

/// A sender that meets a slot a select's receive claimed (and completes
/// later) waits for it without holding the thread.
#[test]
fn a_sender_meeting_a_slot_being_read_lets_the_reader_run() {
    fibra::run(|| {
        let (s, r) = bounded::<u32>(1);
        s.send(1).unwrap();
        let mut sel = Select::new();
        sel.recv(&r);
        let op = sel.select();
        let s2 = s.clone();
        let sender = fibra::spawn(move || s2.send(2).unwrap());
        fibra::sleep(20 * MS); // the sender meets the claimed slot
        assert_eq!(op.recv(&r).unwrap(), 1);
        sender.join().unwrap();
        assert_eq!(r.recv().unwrap(), 2);
    });
}

/// Receivers (blocking and selecting) cancelled while they wait, some at
/// the moment they are woken for a message: a turn a cancelled one was
/// woken for passes to the next, a message handed to one goes back, so
/// the one receiver never cancelled gets every message the others did
/// not take.
#[test]
fn cancels_landing_with_wake_ups_lose_no_turn_and_no_message() {
    const MESSAGES: usize = 3_000;
    let rt = fibra::runtime::Builder::new().workers(2).build().unwrap();
    let (s, r) = bounded::<usize>(1);
    let taken = Arc::new(AtomicUsize::new(0));
    let survivor = {
        let (r, taken) = (r.clone(), taken.clone());
        rt.spawn(move || {
            while r.recv().is_ok() {
                taken.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let sender = std::thread::spawn(move || {
        for i in 0..MESSAGES {
            s.send(i).unwrap();
            if i % 4 == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    });
    let mut round = 0;
    while !sender.is_finished() {
        round += 1;
        let victims: Vec<_> = (0..32)
            .map(|v| {
                let (r, taken) = (r.clone(), taken.clone());
                rt.spawn(move || {
                    loop {
                        let got = if (v + round) % 2 == 0 {
                            r.recv()
                        } else {
                            fibra::select! { recv(r) -> m => m }
                        };
                        if got.is_err() {
                            return;
                        }
                        taken.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_micros(200));
        for v in &victims {
            v.cancel();
        }
        for v in victims {
            let _ = v.join();
        }
    }
    sender.join().unwrap();
    drop(r);
    // Every message is taken; a lost turn leaves one in the ring while the
    // survivor waits for good.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while taken.load(Ordering::SeqCst) < MESSAGES {
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {MESSAGES} messages taken",
            taken.load(Ordering::SeqCst)
        );
        std::thread::sleep(MS);
    }
    assert_eq!(taken.load(Ordering::SeqCst), MESSAGES);
    survivor.join().unwrap();
}

/// Messages left in a ring, holes among them, are dropped once each when
/// the channel goes; so are those of a channel whose receivers left.
#[test]
fn messages_left_are_dropped_once_each() {
    let drops = Arc::new(AtomicUsize::new(0));
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let (s, r) = bounded::<Counted>(8);
    for _ in 0..3 {
        s.send(Counted(drops.clone())).unwrap();
    }
    {
        let mut sel = Select::new();
        sel.send(&s);
        drop_uncompleted(sel.select()); // a hole
    }
    s.send(Counted(drops.clone())).unwrap();
    drop(r.recv().unwrap());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    drop(r); // receivers gone: the three left are dropped now
    assert_eq!(drops.load(Ordering::SeqCst), 4);
    assert!(s.send(Counted(drops.clone())).is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 5);
    drop(s);

    let (s, r) = bounded::<Counted>(2);
    s.send(Counted(drops.clone())).unwrap();
    s.send(Counted(drops.clone())).unwrap();
    drop((s, r));
    assert_eq!(drops.load(Ordering::SeqCst), 7);
}

/// A capacity too large to allocate up front is still a bounded channel
/// (it grows as it fills), not an allocation failure.
#[test]
fn a_huge_capacity_is_a_channel_not_an_abort() {
    let (s, r) = bounded::<u64>(1 << 40);
    assert_eq!(s.capacity(), Some(1 << 40));
    s.send(5).unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(r.recv().unwrap(), 5);
}

/// Wrapping laps many times, with threads and fibers of two workers on
/// both sides, through a ring of one and of three slots: every message
/// once.
#[test]
fn many_laps_through_small_rings_lose_nothing() {
    for cap in [1, 3] {
        let (s, r) = bounded::<usize>(cap);
        let rt = fibra::runtime::Builder::new().workers(2).build().unwrap();
        const EACH: usize = 20_000;
        let mut producers = Vec::new();
        for p in 0..2 {
            let s = s.clone();
            producers.push(std::thread::spawn(move || {
                for i in 0..EACH {
                    s.send(p * EACH + i).unwrap();
                }
            }));
        }
        let fibers: Vec<_> = (2..4)
            .map(|p| {
                let s = s.clone();
                rt.spawn(move || {
                    for i in 0..EACH {
                        s.send(p * EACH + i).unwrap();
                    }
                })
            })
            .collect();
        drop(s);
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let r = r.clone();
                rt.spawn(move || r.iter().count())
            })
            .collect();
        let on_thread = r.iter().count();
        for p in producers {
            p.join().unwrap();
        }
        for f in fibers {
            f.join().unwrap();
        }
        let in_fibers: usize = consumers.into_iter().map(|c| c.join().unwrap()).sum();
        assert_eq!(on_thread + in_fibers, 4 * EACH, "capacity {cap}");
    }
}

/// A large message waits for room and for a receiver on a fiber's stack
/// (256 KiB) without overflowing it: the wait paths hold one copy. 32 KiB
/// in an optimized build; 8 KiB in a debug one, whose frames keep every
/// temporary.
#[test]
fn large_messages_wait_on_a_fibers_stack() {
    const SIZE: usize = if cfg!(debug_assertions) { 8 } else { 32 } * 1024;
    struct Big([u8; SIZE]);
    fibra::run(|| {
        let (s, r) = bounded::<Big>(1);
        let receiver = fibra::spawn(move || {
            let mut sum = 0u64;
            for _ in 0..3 {
                fibra::sleep(2 * MS); // the sender waits for room
                sum += u64::from(r.recv().unwrap().0[7]);
            }
            // and here the receiver waits for a message
            sum += u64::from(r.recv().unwrap().0[7]);
            sum
        });
        for i in 0..3u8 {
            s.send(Big([i; SIZE])).unwrap();
        }
        fibra::sleep(10 * MS);
        s.send(Big([10; SIZE])).unwrap();
        assert_eq!(receiver.join().unwrap(), 13);
    });
}

/// The same claims on an unbounded channel (a list of blocks without a
/// lock): a dropped send leaves a hole, a dropped receive gives its
/// message back first, a receiver meeting a slot being written lets the
/// writer run, and what is left is dropped once — across many blocks.
#[test]
fn the_unbounded_list_keeps_the_same_promises() {
    use fibra::channel::unbounded;
    let (s, r) = unbounded::<u32>();
    for i in 0..100 {
        s.send(i).unwrap();
        if i % 7 == 0 {
            let mut sel = Select::new();
            sel.send(&s);
            drop_uncompleted(sel.select()); // a hole
        }
    }
    {
        let mut sel = Select::new();
        sel.recv(&r);
        drop_uncompleted(sel.select()); // 0 given back
    }
    let got: Vec<u32> = r.try_iter().collect();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
    assert_eq!(r.len(), 0);

    writer_met_by_a_receiver(unbounded);

    let drops = Arc::new(AtomicUsize::new(0));
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let (s, r) = unbounded::<Counted>();
    for _ in 0..100 {
        s.send(Counted(drops.clone())).unwrap();
    }
    for _ in 0..40 {
        drop(r.recv().unwrap());
    }
    assert_eq!(drops.load(Ordering::SeqCst), 40);
    drop(r);
    assert_eq!(drops.load(Ordering::SeqCst), 100);
    let (s2, r2) = unbounded::<Counted>();
    for _ in 0..70 {
        s2.send(Counted(drops.clone())).unwrap();
    }
    drop((s, s2, r2));
    assert_eq!(drops.load(Ordering::SeqCst), 170);
}

/// A receiver cancelled and then handed its message before it runs keeps
/// the message (`recv` returns it) and unwinds at its next park; a sender
/// whose message was taken returns `Ok` the same way. Nothing comes back,
/// so a disconnected, empty channel is over at once for the others. On
/// one thread, so the cancel surely lands between the hand-over and the
/// waiter's run. For every flavour.
#[test]
fn a_wait_served_before_its_cancel_completes_and_unwinds_at_the_next_park() {
    for cap in [None, Some(0), Some(1), Some(4)] {
        fibra::run(move || {
            let (s, r) = cap.map_or_else(fibra::channel::unbounded, bounded::<u32>);
            let kept = Arc::new(AtomicUsize::new(0));
            let receiver = {
                let (r, kept) = (r.clone(), kept.clone());
                fibra::spawn(move || {
                    let m = r.recv().expect("handed its message");
                    kept.store(m as usize, Ordering::SeqCst);
                    fibra::yield_now(); // the cancel lands here
                    unreachable!("cancelled at its next park");
                })
            };
            fibra::yield_now(); // it waits now
            receiver.cancel(); // woken to unwind; it has not run yet
            s.send(7).unwrap(); // handed over all the same
            assert!(receiver.join().unwrap_err().is_cancelled());
            assert_eq!(kept.load(Ordering::SeqCst), 7, "cap {cap:?}: kept");
            drop(s);
            assert!(r.try_recv().unwrap_err().is_disconnected(), "cap {cap:?}");

            // A waiting sender whose message is taken, then cancelled.
            if let Some(cap) = cap {
                let (s, r) = bounded::<u32>(cap);
                for i in 0..cap {
                    s.send(i as u32).unwrap();
                }
                let sent = Arc::new(AtomicUsize::new(0));
                let sender = {
                    let sent = sent.clone();
                    fibra::spawn(move || {
                        s.send(9).expect("taken before the cancel");
                        sent.store(1, Ordering::SeqCst);
                        fibra::yield_now();
                        unreachable!("cancelled at its next park");
                    })
                };
                fibra::yield_now(); // it waits for room (or a receiver)
                sender.cancel();
                let first = r.recv().unwrap(); // takes its message in
                assert!(sender.join().unwrap_err().is_cancelled());
                assert_eq!(sent.load(Ordering::SeqCst), 1, "cap {cap:?}: sent");
                let rest: Vec<u32> = std::iter::once(first).chain(r.try_iter()).collect();
                assert_eq!(rest.last(), Some(&9), "cap {cap:?}: {rest:?}");
            }
        });
    }
}
