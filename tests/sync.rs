//! `fibra::sync` between fibers, threads and runtimes: locks, condvars,
//! semaphores, barriers, wait groups, channels, and cancelled waiters.

mod util;

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fibra::sync::mpsc::{self, RecvTimeoutError, TryRecvError, TrySendError};
use fibra::sync::{Barrier, Condvar, Mutex, RwLock, Semaphore, WaitGroup, oneshot};

const HOUR: Duration = Duration::from_secs(3600);

// ----- channels --------------------------------------------------------

/// Producers in two runtimes (4 fibers each) and 2 plain threads; the
/// consumer in a third runtime: every message arrives exactly once, and
/// each producer's messages in order.
#[test]
fn producers_in_fibers_threads_and_two_runtimes_every_message_counted() {
    const PER_PRODUCER: u64 = 2_000;
    let (tx, rx) = mpsc::sync_channel::<(u64, u64)>(16);
    let mut threads = Vec::new();
    for runtime in 0..2u64 {
        let tx = tx.clone();
        threads.push(std::thread::spawn(move || {
            fibra::run(|| {
                let fibers: Vec<_> = (0..4)
                    .map(|f| {
                        let tx = tx.clone();
                        fibra::spawn(move || {
                            for i in 0..PER_PRODUCER {
                                tx.send((runtime * 10 + f, i)).unwrap();
                                if i % 64 == 0 {
                                    fibra::yield_now();
                                }
                            }
                        })
                    })
                    .collect();
                for f in fibers {
                    f.join().unwrap();
                }
            })
        }));
    }
    for t in 0..2u64 {
        let tx = tx.clone();
        threads.push(std::thread::spawn(move || {
            for i in 0..PER_PRODUCER {
                tx.send((100 + t, i)).unwrap();
            }
        }));
    }
    drop(tx);
    let consumer = std::thread::spawn(move || {
        fibra::run(|| {
            let mut next = std::collections::HashMap::new();
            let mut count = 0u64;
            for (producer, i) in rx {
                let expected = next.entry(producer).or_insert(0u64);
                assert_eq!(i, *expected, "producer {producer} out of order");
                *expected += 1;
                count += 1;
            }
            (count, next.len())
        })
    });
    for t in threads {
        t.join().unwrap();
    }
    let (count, producers) = consumer.join().unwrap();
    assert_eq!(producers, 10);
    assert_eq!(count, 10 * PER_PRODUCER);
}

#[test]
fn a_bounded_channel_holds_back_a_fast_producer() {
    fibra::run(|| {
        let (tx, rx) = mpsc::sync_channel(3);
        let sent = Rc::new(Cell::new(0));
        let s = sent.clone();
        let producer = fibra::spawn(move || {
            for i in 0..10 {
                tx.send(i).unwrap();
                s.set(s.get() + 1);
            }
        });
        fibra::sleep(Duration::from_millis(20));
        assert_eq!(sent.get(), 3, "only the bound may be queued");
        assert_eq!(rx.recv().unwrap(), 0);
        fibra::yield_now();
        assert_eq!(sent.get(), 4, "one taken, one more let in");
        let rest: Vec<i32> = rx.iter().collect();
        assert_eq!(rest, (1..10).collect::<Vec<_>>());
        producer.join().unwrap();
    });
}

#[test]
fn a_rendezvous_send_waits_for_the_receiver() {
    fibra::run(|| {
        let (tx, rx) = mpsc::sync_channel(0);
        assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
        let done = Rc::new(Cell::new(false));
        let d = done.clone();
        let sender = fibra::spawn(move || {
            tx.send(2).unwrap();
            d.set(true);
        });
        fibra::sleep(Duration::from_millis(10));
        assert!(!done.get(), "send returned before anyone received");
        assert_eq!(rx.recv().unwrap(), 2);
        sender.join().unwrap();
        assert!(done.get());
    });
}

#[test]
fn recv_timeout_times_out_and_other_fibers_run_meanwhile() {
    fibra::run(|| {
        let (tx, rx) = mpsc::channel::<u32>();
        let ticks = Rc::new(Cell::new(0));
        let t = ticks.clone();
        let ticker = fibra::spawn(move || {
            for _ in 0..5 {
                fibra::sleep(Duration::from_millis(2));
                t.set(t.get() + 1);
            }
        });
        let start = Instant::now();
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(40)),
            Err(RecvTimeoutError::Timeout)
        );
        assert!(start.elapsed() >= Duration::from_millis(40));
        // (Five ticks of 2 ms fit in the 40 ms, unless the machine is
        // loaded: one shows the runtime ran on.)
        assert!(
            ticks.get() >= 1,
            "the runtime ran on while the receiver waited"
        );
        ticker.join().unwrap();
        // A message from another thread ends the wait early.
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            tx.send(7).unwrap();
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(7));
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(30)),
            Err(RecvTimeoutError::Disconnected)
        );
    });
}

#[test]
fn disconnection_is_seen_on_both_sides_and_wakes_waiters() {
    fibra::run(|| {
        // The receiver parked in recv learns the last sender left.
        let (tx, rx) = mpsc::channel::<u8>();
        let receiver = fibra::spawn(move || rx.recv());
        fibra::yield_now();
        drop(tx);
        assert!(receiver.join().unwrap().is_err());

        // A sender parked on a full channel gets its message back.
        let (tx, rx) = mpsc::sync_channel(1);
        tx.send(1).unwrap();
        let sender = fibra::spawn(move || tx.send(2));
        fibra::yield_now();
        drop(rx);
        assert_eq!(sender.join().unwrap().unwrap_err().0, 2);

        let (tx, rx) = mpsc::channel::<u8>();
        drop(tx);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    });
}

#[test]
fn senders_clone_whatever_the_message_type() {
    struct NotClone(u8);
    let (tx, rx) = mpsc::channel::<NotClone>();
    let (stx, srx) = mpsc::sync_channel::<NotClone>(1);
    tx.clone().send(NotClone(1)).unwrap();
    stx.clone().send(NotClone(2)).unwrap();
    assert_eq!(rx.recv().unwrap().0 + srx.recv().unwrap().0, 3);
    drop((tx, stx));
    assert!(
        rx.recv().is_err() && srx.recv().is_err(),
        "clones were counted"
    );
}

#[test]
fn queued_messages_are_dropped_with_the_receiver() {
    let drops = util::SyncDropCount::default();
    let (tx, rx) = mpsc::channel();
    for _ in 0..3 {
        tx.send(drops.guard()).unwrap();
    }
    drop(rx);
    assert_eq!(drops.get(), 3);
    assert!(tx.send(drops.guard()).is_err());
    assert_eq!(drops.get(), 4);
}

#[test]
fn a_receiver_cancelled_as_a_message_reaches_it_loses_nothing() {
    fibra::run(|| {
        let (tx, rx) = mpsc::channel::<u32>();
        let rx = Rc::new(rx);
        let (r1, r2) = (rx.clone(), rx.clone());
        let first = fibra::spawn(move || r1.recv().ok());
        let second = fibra::spawn(move || r2.recv().ok());
        fibra::yield_now(); // both parked, `first` in front
        first.cancel(); // cancelled, but still in line until it runs...
        tx.send(5).unwrap(); // ...so the message is handed to it
        // As `fibra::channel`'s: what a waiter was handed is kept (its
        // cancel lands at its next park), never handed back or lost.
        assert_eq!(first.join().unwrap(), Some(5), "the message was lost");
        drop(tx);
        assert_eq!(second.join().unwrap(), None);
    });
}

#[test]
fn oneshot_delivers_one_value_across_threads() {
    let (tx, rx) = oneshot::channel();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(5));
        tx.send(String::from("answer")).unwrap();
    });
    let got = fibra::run(|| rx.recv().unwrap());
    assert_eq!(got, "answer");
    t.join().unwrap();

    let (tx, rx) = oneshot::channel::<u8>();
    drop(tx);
    assert!(rx.recv().is_err());
}

/// A rendezvous channel each way between a plain thread and a fiber on
/// another thread, many times over: every waiter is served on the other
/// thread while it parks (or just after it woke for another reason), and
/// takes its message without the lock; none is lost, doubled or reordered.
#[test]
fn rendezvous_ping_pong_between_a_thread_and_a_fiber() {
    let (ping_tx, ping_rx) = mpsc::sync_channel::<u32>(0);
    let (pong_tx, pong_rx) = mpsc::sync_channel::<u32>(0);
    let echo = std::thread::spawn(move || {
        fibra::run(move || {
            for v in ping_rx {
                pong_tx.send(v.wrapping_mul(3)).unwrap();
            }
        })
    });
    for i in 0..10_000u32 {
        ping_tx.send(i).unwrap();
        assert_eq!(pong_rx.recv().unwrap(), i.wrapping_mul(3));
    }
    drop(ping_tx);
    echo.join().unwrap();
    assert!(pong_rx.recv().is_err(), "the echo's sender is gone");
}

// ----- mutex, rwlock ---------------------------------------------------

#[test]
fn a_mutex_held_across_parks_by_100_fibers_is_exclusive_and_fifo() {
    fibra::run(|| {
        let lock = Arc::new(Mutex::new(Vec::new()));
        let inside = Rc::new(Cell::new(0));
        let fibers: Vec<_> = (0..100)
            .map(|i| {
                let (lock, inside) = (lock.clone(), inside.clone());
                fibra::spawn(move || {
                    let mut order = lock.lock().unwrap();
                    inside.set(inside.get() + 1);
                    assert_eq!(inside.get(), 1, "two fibers inside the lock");
                    fibra::sleep(Duration::from_micros(100)); // parked, still holding it
                    fibra::yield_now();
                    order.push(i);
                    inside.set(inside.get() - 1);
                })
            })
            .collect();
        for f in fibers {
            f.join().unwrap();
        }
        let order = lock.lock().unwrap();
        assert_eq!(*order, (0..100).collect::<Vec<_>>(), "served out of order");
    });
}

#[test]
fn a_mutex_shared_by_threads_and_fibers_of_two_runtimes() {
    let counter = Arc::new(Mutex::new(0u64));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let counter = counter.clone();
            std::thread::spawn(move || {
                if w % 2 == 0 {
                    fibra::run(|| {
                        let fibers: Vec<_> = (0..10)
                            .map(|_| {
                                let counter = counter.clone();
                                fibra::spawn(move || {
                                    for _ in 0..500 {
                                        let mut c = counter.lock().unwrap();
                                        let v = *c;
                                        fibra::yield_now();
                                        *c = v + 1;
                                    }
                                })
                            })
                            .collect();
                        for f in fibers {
                            f.join().unwrap();
                        }
                    })
                } else {
                    for _ in 0..5_000 {
                        *counter.lock().unwrap() += 1;
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(*counter.lock().unwrap(), 2 * 10 * 500 + 2 * 5_000);
}

#[test]
fn a_fiber_that_panics_or_is_cancelled_holding_a_lock_poisons_it() {
    fibra::run(|| {
        let m = Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let r = fibra::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("while holding the lock");
        })
        .join();
        assert!(r.unwrap_err().is_panic());
        assert!(m.is_poisoned());
        let err = m.lock().unwrap_err();
        assert_eq!(**err.get_ref(), 1, "the data is still reachable");
        drop(err);
        m.clear_poison();

        let m3 = m.clone();
        let holder = fibra::spawn(move || {
            let _g = m3.lock().unwrap();
            fibra::sleep(HOUR);
        });
        fibra::yield_now();
        holder.cancel();
        assert!(holder.join().unwrap_err().is_cancelled());
        assert!(m.is_poisoned(), "a cancelled holder unwound: poisoned");

        // A panic caught in another fiber of this thread does not poison
        // locks held by fibers that are not unwinding.
        let rw = Arc::new(RwLock::new(0));
        let rw2 = rw.clone();
        let writer = fibra::spawn(move || {
            let mut w = rw2.write().unwrap();
            fibra::yield_now();
            *w += 1;
        });
        let _ = fibra::spawn(|| panic!("unrelated")).join();
        writer.join().unwrap();
        assert!(!rw.is_poisoned());
    });
}

#[test]
fn a_waiting_writer_is_not_starved_by_readers() {
    fibra::run(|| {
        let lock = Rc::new(RwLock::new(0));
        let stop = Rc::new(Cell::new(false));
        let readers: Vec<_> = (0..5)
            .map(|_| {
                let (lock, stop) = (lock.clone(), stop.clone());
                fibra::spawn(move || {
                    let mut reads = 0;
                    while !stop.get() {
                        let _r = lock.read().unwrap();
                        fibra::yield_now(); // readers overlap all the time
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        fibra::yield_now();
        *lock.write().unwrap() += 1; // must get in despite the readers
        stop.set(true);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        assert_eq!(*lock.read().unwrap(), 1);
    });
}

#[test]
fn cancelled_lock_waiters_leave_no_trace_and_lose_no_wake_up() {
    fibra::run(|| {
        let m = Rc::new(Mutex::new(()));
        let guard = m.lock().unwrap();
        let got = Rc::new(RefCell::new(Vec::new()));
        let waiters: Vec<_> = (0..3)
            .map(|i| {
                let (m, got) = (m.clone(), got.clone());
                fibra::spawn(move || {
                    let _g = m.lock().unwrap();
                    got.borrow_mut().push(i);
                })
            })
            .collect();
        fibra::yield_now(); // all three wait in line
        waiters[0].cancel(); // cancelled, still in line until it runs...
        drop(guard); // ...so the lock is handed to it; it passes it on
        waiters[1].cancel(); // to 1, cancelled too: on to 2
        let mut results = waiters.into_iter().map(|w| w.join());
        assert!(results.next().unwrap().unwrap_err().is_cancelled());
        assert!(results.next().unwrap().unwrap_err().is_cancelled());
        results.next().unwrap().unwrap();
        assert_eq!(*got.borrow(), [2]);
        assert!(m.try_lock().is_ok(), "the lock leaked");

        // The same for a timed wait that runs out.
        let s = Semaphore::new(0);
        assert!(s.acquire_timeout(Duration::from_millis(5)).is_none());
        s.add_permits(1);
        assert!(
            s.try_acquire().is_some(),
            "a timed-out waiter stayed in line"
        );
    });
}

// ----- condvar ---------------------------------------------------------

#[test]
fn a_condvar_between_a_thread_and_a_fiber_both_ways() {
    let state = Arc::new((Mutex::new(0u32), Condvar::new()));
    let s = state.clone();
    // The thread waits for the fiber, the fiber for the thread, 100 times.
    let thread = std::thread::spawn(move || {
        let (m, cv) = &*s;
        for round in 0..100 {
            let mut n = cv
                .wait_while(m.lock().unwrap(), |n| *n != 2 * round + 1)
                .unwrap();
            *n += 1;
            cv.notify_all();
        }
    });
    fibra::run(|| {
        let (m, cv) = &*state;
        for round in 0..100 {
            let mut n = cv
                .wait_while(m.lock().unwrap(), |n| *n != 2 * round)
                .unwrap();
            *n += 1;
            cv.notify_all();
        }
    });
    thread.join().unwrap();
    assert_eq!(*state.0.lock().unwrap(), 200);
}

#[test]
fn a_notification_to_a_cancelled_condvar_waiter_goes_to_the_next() {
    fibra::run(|| {
        let pair = Rc::new((Mutex::new(()), Condvar::new()));
        let woken = Rc::new(Cell::new(0));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (pair, woken) = (pair.clone(), woken.clone());
                fibra::spawn(move || {
                    let g = pair.0.lock().unwrap();
                    let _g = pair.1.wait(g).unwrap();
                    woken.set(woken.get() + 1);
                })
            })
            .collect();
        fibra::yield_now();
        waiters[0].cancel(); // cancelled, but still in line until it runs...
        pair.1.notify_one(); // ...so the notification goes to it
        let mut w = waiters.into_iter();
        assert!(w.next().unwrap().join().unwrap_err().is_cancelled());
        let second = w.next().unwrap();
        fibra::sleep(Duration::from_millis(10));
        assert!(second.is_finished(), "the notification was lost");
        second.join().unwrap();
        assert_eq!(woken.get(), 1);
    });
}

#[test]
fn condvar_wait_timeout_reports_the_timeout() {
    fibra::run(|| {
        let (m, cv) = (Mutex::new(()), Condvar::new());
        let start = Instant::now();
        let (_g, r) = cv
            .wait_timeout(m.lock().unwrap(), Duration::from_millis(20))
            .unwrap();
        assert!(r.timed_out());
        assert!(start.elapsed() >= Duration::from_millis(20));
    });
}

// ----- semaphore, barrier, wait group -----------------------------------

#[test]
fn a_semaphore_caps_concurrency_at_its_permits() {
    let sem = Arc::new(Semaphore::new(3));
    let now = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let work = {
        let (sem, now, peak) = (sem.clone(), now.clone(), peak.clone());
        move || {
            let _p = sem.acquire();
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(n, Ordering::SeqCst);
            fibra::sleep(Duration::from_millis(2));
            now.fetch_sub(1, Ordering::SeqCst);
        }
    };
    let thread_work = work.clone();
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let w = thread_work.clone();
            std::thread::spawn(move || (0..5).for_each(|_| w()))
        })
        .collect();
    fibra::run(|| {
        let fibers: Vec<_> = (0..30).map(|_| fibra::spawn(work.clone())).collect();
        for f in fibers {
            f.join().unwrap();
        }
    });
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(peak.load(Ordering::SeqCst), 3);
    assert_eq!(sem.available_permits(), 3);
}

#[test]
fn a_barrier_opens_for_fibers_and_threads_together_round_after_round() {
    let barrier = Arc::new(Barrier::new(4));
    let leaders = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (b, l) = (barrier.clone(), leaders.clone());
            std::thread::spawn(move || {
                for _ in 0..10 {
                    if b.wait().is_leader() {
                        l.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    fibra::run(|| {
        let fibers: Vec<_> = (0..2)
            .map(|_| {
                let (b, l) = (barrier.clone(), leaders.clone());
                fibra::spawn(move || {
                    for _ in 0..10 {
                        if b.wait().is_leader() {
                            l.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for f in fibers {
            f.join().unwrap();
        }
    });
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(leaders.load(Ordering::SeqCst), 10, "one leader per round");
}

#[test]
fn a_cancelled_barrier_waiter_leaves_the_barrier() {
    fibra::run(|| {
        let barrier = Rc::new(Barrier::new(2));
        let b = barrier.clone();
        let quitter = fibra::spawn(move || b.wait());
        fibra::yield_now();
        quitter.cancel();
        assert!(quitter.join().unwrap_err().is_cancelled());
        // Had it still counted, this would open the barrier alone.
        let b = barrier.clone();
        let late = fibra::spawn(move || b.wait().is_leader());
        fibra::sleep(Duration::from_millis(5));
        assert!(!late.is_finished());
        assert!(barrier.wait().is_leader());
        assert!(!late.join().unwrap());
    });
}

#[test]
fn a_wait_group_waits_for_every_member_and_wakes_every_waiter() {
    fibra::run(|| {
        let wg = WaitGroup::new();
        let done = Rc::new(Cell::new(0));
        for i in 0..20 {
            let (wg, done) = (wg.clone(), done.clone());
            fibra::spawn(move || {
                fibra::sleep(Duration::from_millis(i % 5));
                done.set(done.get() + 1);
                drop(wg);
            });
        }
        let other = wg.clone();
        let second_waiter = fibra::spawn(move || other.wait());
        wg.wait();
        assert_eq!(done.get(), 20);
        second_waiter.join().unwrap();
    });
}

#[test]
fn misuse_panics_with_a_message() {
    let err = std::panic::catch_unwind(|| Barrier::new(0)).unwrap_err();
    assert!(util::panic_message(&*err).contains("at least one party"));
    let s = Semaphore::new(0); // valid: permits can come later
    assert!(s.try_acquire().is_none());
}

/// Every message of a many-to-one stress between fibers of one runtime
/// arrives once, with cancellations thrown in.
#[test]
fn a_channel_under_cancellation_loses_and_duplicates_nothing() {
    fibra::run(|| {
        let (tx, rx) = mpsc::sync_channel::<u32>(2);
        let rx = Rc::new(rx);
        let got = Rc::new(RefCell::new(HashSet::new()));
        // Consumers that get cancelled at random moments; whatever they
        // received before is recorded.
        let mut consumers = Vec::new();
        for _ in 0..8 {
            let (rx, got) = (rx.clone(), got.clone());
            consumers.push(fibra::spawn(move || {
                while let Ok(v) = rx.recv() {
                    assert!(got.borrow_mut().insert(v), "{v} received twice");
                }
            }));
        }
        let producer = fibra::spawn(move || {
            for i in 0..2_000 {
                tx.send(i).unwrap();
            }
        });
        for (i, c) in consumers.iter().enumerate().take(6) {
            for _ in 0..i * 7 {
                fibra::yield_now();
            }
            c.cancel();
        }
        producer.join().unwrap();
        for c in consumers {
            let _ = c.join();
        }
        // Whatever the cancelled ones left is still in the channel.
        while let Ok(v) = rx.try_recv() {
            assert!(got.borrow_mut().insert(v), "{v} received twice");
        }
        assert_eq!(got.borrow().len(), 2_000, "messages were lost");
    });
}

/// Owned permits (tokio's `acquire_owned`) move into spawned fibers — here
/// 1 000 of them, taken before each fiber exists — and onto threads; no
/// more than the semaphore's count hold one at once, and every one comes
/// back.
#[test]
fn owned_permits_move_into_a_thousand_fibers_and_onto_threads() {
    let slots = Arc::new(Semaphore::new(10));
    let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    fibra::run({
        let (slots, now, most) = (slots.clone(), now.clone(), most.clone());
        move || {
            let fibers: Vec<_> = (0..1000)
                .map(|i| {
                    let permit = slots.clone().acquire_owned(); // parks at 10
                    let (now, most) = (now.clone(), most.clone());
                    fibra::spawn(move || {
                        let held = now.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(held, Ordering::SeqCst);
                        fibra::sleep(Duration::from_micros(100 * (i % 5)));
                        now.fetch_sub(1, Ordering::SeqCst);
                        drop(permit);
                    })
                })
                .collect();
            for f in fibers {
                f.join().unwrap();
            }
        }
    });
    assert_eq!(slots.available_permits(), 10);
    assert!(
        most.load(Ordering::SeqCst) <= 10,
        "{} held at once",
        most.load(Ordering::SeqCst)
    );
    // Onto threads, and back from there; `try_acquire_owned` sees the count.
    let permits: Vec<_> = (0..10)
        .map(|_| slots.clone().try_acquire_owned().unwrap())
        .collect();
    assert!(slots.clone().try_acquire_owned().is_none());
    let threads: Vec<_> = permits
        .into_iter()
        .map(|p| std::thread::spawn(move || drop(p)))
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(slots.available_permits(), 10);
    // A forgotten permit stays taken.
    slots.clone().acquire_owned().forget();
    assert_eq!(slots.available_permits(), 9);
}
