//! `fibra::channel`: crossbeam's semantics, with fibers and threads mixed —
//! exact counts under contention, rendezvous, disconnection waking every
//! waiter, a cancel or `fibra::timeout` landing as a message is handed
//! over (nothing lost, nothing doubled), `select!` completing exactly one
//! operation, timers.

mod util;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fibra::channel::{
    Receiver, RecvTimeoutError, Select, SendTimeoutError, Sender, TryRecvError, TrySendError,
    after, bounded, never, tick, unbounded,
};

const MS: Duration = Duration::from_millis(1);

/// Messages from producer fibers (on two workers) and producer threads to
/// consumer fibers and a consumer thread, through each kind of channel:
/// every message arrives exactly once, each producer's in order.
#[test]
fn a_million_messages_each_once_in_order_per_producer() {
    for cap in [Some(0), Some(1), Some(64), None] {
        let (s, r) = match cap {
            Some(c) => bounded::<(usize, usize)>(c),
            None => unbounded(),
        };
        let per_producer = if cap == Some(0) { 25_000 } else { 125_000 };
        const PRODUCERS: usize = 4; // 2 fibers, 2 threads
        let rt = fibra::runtime::Builder::new().workers(2).build().unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let consume = |r: Receiver<(usize, usize)>, seen: Arc<std::sync::Mutex<Vec<_>>>| {
            move || {
                let mut last = [None::<usize>; PRODUCERS];
                let mut got = Vec::new();
                for (p, i) in r.iter() {
                    assert!(last[p].is_none_or(|l| l < i), "producer {p} out of order");
                    last[p] = Some(i);
                    got.push((p, i));
                }
                seen.lock().unwrap().extend(got);
            }
        };
        let thread_consumer = std::thread::spawn(consume(r.clone(), seen.clone()));
        let thread_producers: Vec<_> = (2..PRODUCERS)
            .map(|p| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..per_producer {
                        s.send((p, i)).unwrap();
                    }
                })
            })
            .collect();
        rt.block_on(|| {
            let consumers: Vec<_> = (0..3)
                .map(|_| fibra::spawn(consume(r.clone(), seen.clone())))
                .collect();
            let producers: Vec<_> = (0..2)
                .map(|p| {
                    let s = s.clone();
                    fibra::spawn(move || {
                        for i in 0..per_producer {
                            s.send((p, i)).unwrap();
                        }
                    })
                })
                .collect();
            drop((s, r));
            for p in producers {
                p.join().unwrap();
            }
            for t in thread_producers {
                t.join().unwrap();
            }
            for c in consumers {
                c.join().unwrap();
            }
        });
        thread_consumer.join().unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), PRODUCERS * per_producer, "cap {cap:?}");
        let unique: HashSet<_> = seen.iter().collect();
        assert_eq!(unique.len(), seen.len(), "cap {cap:?}: a message twice");
    }
}

#[test]
fn rendezvous_hands_over_only_to_a_waiting_receiver() {
    fibra::run(|| {
        let (s, r) = bounded::<u32>(0);
        assert!(s.is_full() && s.is_empty());
        assert_eq!(s.capacity(), Some(0));
        assert_eq!(s.try_send(1), Err(TrySendError::Full(1)));
        let taker = fibra::spawn(move || r.recv().unwrap());
        fibra::yield_now(); // the taker waits now
        assert_eq!(s.try_send(2), Ok(()));
        assert_eq!(taker.join().unwrap(), 2);
        // A send waits for its receiver.
        let (s, r) = bounded::<u32>(0);
        let start = Instant::now();
        let late = fibra::spawn(move || {
            fibra::sleep(20 * MS);
            r.recv().unwrap()
        });
        s.send(3).unwrap();
        assert!(start.elapsed() >= 15 * MS);
        assert_eq!(late.join().unwrap(), 3);
    });
}

#[test]
fn bounded_send_waits_for_room_and_times_out() {
    fibra::run(|| {
        let (s, r) = bounded(2);
        s.send(1).unwrap();
        s.send(2).unwrap();
        assert!(s.is_full());
        assert_eq!(s.len(), 2);
        assert_eq!(
            s.send_timeout(3, 10 * MS),
            Err(SendTimeoutError::Timeout(3))
        );
        let r2 = r.clone();
        let freer = fibra::spawn(move || {
            fibra::sleep(10 * MS);
            r2.recv().unwrap()
        });
        s.send(3).unwrap(); // waits for the room the freer makes
        assert_eq!(freer.join().unwrap(), 1);
        assert_eq!(r.try_iter().collect::<Vec<_>>(), [2, 3]);
        assert_eq!(r.recv_timeout(5 * MS), Err(RecvTimeoutError::Timeout));
    });
}

/// The last sender gone wakes every waiting receiver (after they take
/// what is left); the last receiver gone wakes every waiting sender, with
/// its message back.
#[test]
fn disconnection_wakes_every_waiter() {
    fibra::run(|| {
        let (s, r) = unbounded::<u32>();
        let waiting: Vec<_> = (0..10)
            .map(|_| {
                let r = r.clone();
                fibra::spawn(move || r.recv())
            })
            .collect();
        let thread = {
            let r = r.clone();
            std::thread::spawn(move || r.recv())
        };
        fibra::sleep(10 * MS);
        s.send(7).unwrap();
        drop(s);
        let results: Vec<_> = waiting.into_iter().map(|w| w.join().unwrap()).collect();
        let thread = thread.join().unwrap();
        let oks = results
            .iter()
            .chain([&thread])
            .filter(|r| r.is_ok())
            .count();
        assert_eq!(oks, 1, "one receiver got the message");
        assert_eq!(r.try_recv(), Err(TryRecvError::Disconnected));

        let (s, r) = bounded::<u32>(0);
        let senders: Vec<_> = (0..10)
            .map(|i| {
                let s = s.clone();
                fibra::spawn(move || s.send(i))
            })
            .collect();
        fibra::sleep(10 * MS);
        drop(r);
        for (i, sender) in senders.into_iter().enumerate() {
            let err = sender.join().unwrap().unwrap_err();
            assert_eq!(err.into_inner(), i as u32, "the message comes back");
        }
        assert!(s.send(0).is_err());
    });
}

/// Receivers cancelled or timed out just as a message is handed to them:
/// every message is received exactly once by someone.
#[test]
fn a_cancel_or_timeout_landing_with_a_message_loses_nothing() {
    const ROUNDS: usize = 3_000;
    let rt = fibra::runtime::Builder::new().workers(2).build().unwrap();
    let (s, r) = unbounded::<usize>();
    let received = Arc::new(AtomicUsize::new(0));
    let sum = Arc::new(AtomicUsize::new(0));
    let sender = std::thread::spawn(move || {
        for i in 0..ROUNDS {
            s.send(i).unwrap();
            if i % 64 == 0 {
                std::thread::yield_now();
            }
        }
    });
    rt.block_on(|| {
        for round in 0..ROUNDS {
            let (r1, received, sum) = (r.clone(), received.clone(), sum.clone());
            let victim = fibra::spawn(move || {
                // Half of them under a timeout of about the send's pace.
                let got = if round % 2 == 0 {
                    fibra::timeout(Duration::from_micros(50), || r1.recv()).ok()
                } else {
                    Some(r1.recv())
                };
                if let Some(Ok(m)) = got {
                    received.fetch_add(1, Ordering::Relaxed);
                    sum.fetch_add(m, Ordering::Relaxed);
                }
            });
            if round % 3 == 0 {
                fibra::yield_now();
            }
            victim.cancel();
            let _ = victim.join();
        }
    });
    sender.join().unwrap();
    // What no victim kept is still in the channel.
    for m in r.try_iter() {
        received.fetch_add(1, Ordering::Relaxed);
        sum.fetch_add(m, Ordering::Relaxed);
    }
    assert_eq!(received.load(Ordering::Relaxed), ROUNDS);
    assert_eq!(sum.load(Ordering::Relaxed), ROUNDS * (ROUNDS - 1) / 2);
}

/// A select completes one operation: the other ready channel keeps its
/// message; a send arm's value is made only when chosen.
#[test]
fn select_completes_exactly_one_operation() {
    let (s1, r1) = unbounded();
    let (s2, r2) = unbounded();
    s1.send(1).unwrap();
    s2.send(2).unwrap();
    let got = fibra::select! {
        recv(r1) -> m => m.unwrap(),
        recv(r2) -> m => m.unwrap(),
    };
    let left: Vec<_> = r1.try_iter().chain(r2.try_iter()).collect();
    assert_eq!(left.len(), 1);
    assert_eq!(got + left[0], 3);

    let made = AtomicUsize::new(0);
    let (full_s, _full_r) = bounded::<usize>(0);
    let (room_s, room_r) = bounded::<usize>(1);
    fibra::select! {
        send(full_s, made.fetch_add(1, Ordering::Relaxed)) -> _ => panic!("no receiver waits"),
        send(room_s, made.fetch_add(10, Ordering::Relaxed)) -> res => res.unwrap(),
    }
    assert_eq!(
        made.load(Ordering::Relaxed),
        10,
        "only the chosen value was made"
    );
    assert_eq!(room_r.try_recv(), Ok(0));
}

#[test]
fn select_chooses_at_random_and_biased_chooses_the_first() {
    let (s1, r1) = unbounded::<()>();
    let (s2, r2) = unbounded::<()>();
    let mut firsts = 0;
    for _ in 0..2000 {
        s1.send(()).unwrap();
        s2.send(()).unwrap();
        fibra::select! {
            recv(r1) -> _ => { firsts += 1; r2.recv().unwrap() },
            recv(r2) -> _ => r1.recv().unwrap(),
        }
    }
    assert!((600..1400).contains(&firsts), "{firsts} of 2000");
    for _ in 0..100 {
        s1.send(()).unwrap();
        s2.send(()).unwrap();
        fibra::select_biased! {
            recv(r1) -> _ => r2.recv().unwrap(),
            recv(r2) -> _ => panic!("biased to the first"),
        }
    }
}

/// Selects waiting in fibers, fed by a thread; and a select's send meeting
/// a select's receive on a rendezvous channel.
#[test]
fn selects_in_fibers_fed_by_a_thread_and_by_each_other() {
    let (s_a, r_a) = unbounded::<u32>();
    let (s_b, r_b) = bounded::<u32>(0);
    let feeder = std::thread::spawn(move || {
        for i in 0..1000 {
            if i % 2 == 0 {
                s_a.send(i).unwrap();
            } else {
                s_b.send(i).unwrap();
            }
        }
    });
    let total = fibra::run(move || {
        let fibers: Vec<_> = (0..4)
            .map(|_| {
                let (r_a, r_b) = (r_a.clone(), r_b.clone());
                fibra::spawn(move || {
                    let mut sum = 0u64;
                    loop {
                        fibra::select! {
                            recv(r_a) -> m => match m { Ok(m) => sum += u64::from(m), Err(_) => break },
                            recv(r_b) -> m => match m { Ok(m) => sum += u64::from(m), Err(_) => break },
                        }
                    }
                    // One side closed: drain the other.
                    sum + r_a.iter().chain(r_b.iter()).map(u64::from).sum::<u64>()
                })
            })
            .collect();
        drop((r_a, r_b));
        fibers.into_iter().map(|f| f.join().unwrap()).sum::<u64>()
    });
    feeder.join().unwrap();
    assert_eq!(total, (0..1000u64).sum::<u64>());

    // select-send against select-receive, both waiting, one thread.
    fibra::run(|| {
        let (s, r) = bounded::<u32>(0);
        let (_idle_s, idle_r) = unbounded::<u32>();
        let (idle_s2, _idle_r2) = bounded::<u32>(0);
        let receiver = fibra::spawn(move || {
            (0..100)
                .map(|_| {
                    fibra::select! {
                        recv(r) -> m => m.unwrap(),
                        recv(idle_r) -> _ => unreachable!(),
                    }
                })
                .sum::<u32>()
        });
        for i in 0..100 {
            fibra::select! {
                send(s, i) -> res => res.unwrap(),
                send(idle_s2, 0) -> _ => unreachable!(),
            }
        }
        assert_eq!(receiver.join().unwrap(), (0..100).sum::<u32>());
    });
}

#[test]
fn select_defaults_and_timeouts() {
    let (_s, r) = unbounded::<u8>();
    let hit = fibra::select! {
        recv(r) -> _ => false,
        default => true,
    };
    assert!(hit);
    let start = Instant::now();
    fibra::select! {
        recv(r) -> _ => unreachable!(),
        default(20 * MS) => {}
    }
    assert!(start.elapsed() >= 15 * MS);
    // after as a timeout arm, in a fiber, while another fiber runs.
    fibra::run(|| {
        let ticker = fibra::spawn(|| {
            for _ in 0..5 {
                fibra::sleep(2 * MS);
            }
        });
        let (_s, r) = unbounded::<u8>();
        let start = Instant::now();
        let timed_out = fibra::select! {
            recv(r) -> _ => false,
            recv(after(20 * MS)) -> at => { assert!(at.unwrap() <= Instant::now()); true }
        };
        assert!(timed_out && start.elapsed() >= 15 * MS);
        ticker.join().unwrap();
    });
}

#[test]
fn timers_after_at_tick_never() {
    let a = after(10 * MS);
    assert_eq!(a.capacity(), Some(1));
    assert_eq!(a.try_recv(), Err(TryRecvError::Empty));
    let due = a.recv().unwrap();
    assert!(due <= Instant::now());
    // Delivered once across clones.
    let b = a.clone();
    assert_eq!(b.recv_timeout(5 * MS), Err(RecvTimeoutError::Timeout));
    let t = tick(5 * MS);
    let (first, second) = (t.recv().unwrap(), t.recv().unwrap());
    assert!(second - first >= 5 * MS);
    let n: Receiver<u8> = never();
    assert_eq!(n.recv_timeout(5 * MS), Err(RecvTimeoutError::Timeout));
    assert!(n.same_channel(&never()));
    assert_eq!(n.capacity(), Some(0));
}

/// `cancel` unwinds a fiber parked in `recv`, `send` and `select!`; the
/// channel is left with nothing registered (later traffic flows).
#[test]
fn cancel_unwinds_every_wait() {
    fibra::run(|| {
        let (s, r) = bounded::<u32>(0);
        let (s2, r2) = bounded::<u32>(1);
        s2.send(0).unwrap(); // full: a send waits
        let waits = [
            fibra::spawn({
                let r = r.clone();
                move || {
                    let _ = r.recv();
                }
            }),
            fibra::spawn({
                let s2 = s2.clone();
                move || {
                    let _ = s2.send(1);
                }
            }),
            fibra::spawn({
                let (r, s2) = (r.clone(), s2.clone());
                let (keep, idle) = unbounded::<u32>();
                move || {
                    let _keep = keep; // a sender alive: `idle` stays connected
                    fibra::select! {
                        recv(r) -> _ => {},
                        recv(idle) -> _ => {},
                        send(s2, 5) -> _ => {},
                    }
                }
            }),
        ];
        fibra::sleep(5 * MS);
        for w in &waits {
            w.cancel();
        }
        for (i, w) in waits.into_iter().enumerate() {
            assert!(w.join().is_err_and(|e| e.is_cancelled()), "wait {i}");
        }
        let taker = fibra::spawn(move || r.recv().unwrap());
        s.send(9).unwrap();
        assert_eq!(taker.join().unwrap(), 9);
        assert_eq!(
            r2.try_iter().collect::<Vec<_>>(),
            [0],
            "the select sent nothing"
        );
    });
}

#[test]
fn select_ready_and_remove() {
    let (s1, r1) = unbounded::<u8>();
    let (s2, r2) = unbounded::<u8>();
    let mut sel = Select::new();
    let i1 = sel.recv(&r1);
    let i2 = sel.recv(&r2);
    assert!(sel.try_ready().is_err());
    s2.send(1).unwrap();
    assert_eq!(sel.ready(), i2);
    sel.remove(i2);
    assert!(sel.ready_timeout(5 * MS).is_err());
    let feeder = std::thread::spawn(move || {
        std::thread::sleep(10 * MS);
        s1.send(2).unwrap();
    });
    assert_eq!(sel.ready(), i1);
    let op = sel.select();
    assert_eq!(op.index(), i1);
    assert_eq!(op.recv(&r1), Ok(2));
    feeder.join().unwrap();
}

#[test]
fn senders_and_receivers_are_send_sync_clone_debug() {
    fn check<T: Send + Sync + Clone + std::fmt::Debug>() {}
    check::<Sender<String>>();
    check::<Receiver<String>>();
    let (s, r) = unbounded::<u8>();
    assert_eq!(format!("{s:?} {r:?}"), "Sender { .. } Receiver { .. }");
    assert!(s.same_channel(&s.clone()));
    assert!(!r.same_channel(&unbounded::<u8>().1));
    assert_eq!(
        TrySendError::Full(1).to_string(),
        "sending on a full channel"
    );
    assert_eq!(
        RecvTimeoutError::Disconnected.to_string(),
        "channel is empty and disconnected"
    );
}

/// A chosen operation is completed with any handle of its channel (a
/// clone), and refuses another channel's, giving back what it held.
#[test]
fn a_selected_operation_completes_with_a_clone_and_refuses_strangers() {
    let (s, r) = unbounded::<u8>();
    s.send(4).unwrap();
    let mut sel = Select::new();
    sel.recv(&r);
    let op = sel.select();
    assert_eq!(op.recv(&r.clone()), Ok(4));

    let (_other_s, other_r) = unbounded::<u8>();
    s.send(5).unwrap();
    let mut sel = Select::new();
    sel.recv(&r);
    let op = sel.select();
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| op.recv(&other_r)));
    let payload = refused.unwrap_err();
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"passed a receiver that wasn't selected")
    );
    assert_eq!(r.try_recv(), Ok(5), "the message was given back");

    // Dropped uncompleted: a plain `&str` panic, the message given back.
    s.send(6).unwrap();
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut sel = Select::new();
        sel.recv(&r);
        drop(sel.select());
    }));
    assert_eq!(
        dropped.unwrap_err().downcast_ref::<&str>(),
        Some(&"dropped `SelectedOperation` without completing the operation")
    );
    assert_eq!(r.try_recv(), Ok(6));
}

/// A tick is the instant it was due; one taken late restarts the schedule
/// from its receipt, and a timely receiver's ticks do not drift.
#[test]
fn ticks_are_their_scheduled_instants() {
    let start = Instant::now();
    let t = tick(50 * MS);
    let first = t.recv().unwrap();
    assert!(first >= start + 50 * MS && first < start + 150 * MS);
    std::thread::sleep(200 * MS);
    let stale = t.try_recv().unwrap();
    assert_eq!(stale, first + 50 * MS, "the scheduled instant, in the past");
    assert_eq!(
        t.try_recv(),
        Err(TryRecvError::Empty),
        "missed ticks dropped"
    );
    let next = t.recv().unwrap();
    assert!(next - stale >= 200 * MS, "restarted from the late receipt");
}
