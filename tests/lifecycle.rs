//! Fiber lifecycles: results, panics, cancellation, timeouts, scopes,
//! dropping a runtime with fibers in it, and bad input.

mod util;

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::time::{Duration, Instant};

use fibra::io::{EventFd, Interest};
use util::{DropCount, SyncDropCount, panic_message};

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn a_panicking_fiber_is_reported_to_join_and_the_others_run_on() {
    fibra::run(|| {
        let bad = fibra::spawn(|| -> u32 { panic!("fiber failure {}", 7) });
        let good = fibra::spawn(|| {
            fibra::yield_now();
            5
        });
        let err = bad.join().unwrap_err();
        assert!(err.is_panic() && !err.is_cancelled());
        assert!(err.to_string().contains("fiber failure 7"), "{err}");
        assert_eq!(panic_message(err.into_panic().as_ref()), "fiber failure 7");
        assert_eq!(good.join().unwrap(), 5);
    });
}

#[test]
fn block_on_reraises_its_panic_and_the_runtime_stays_usable() {
    let rt = fibra::Runtime::new().unwrap();
    let survivor = rt.spawn(|| {
        fibra::sleep(Duration::from_millis(5));
        "alive"
    });
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(|| {
            fibra::yield_now();
            panic!("root failure");
        })
    }));
    assert_eq!(panic_message(caught.unwrap_err().as_ref()), "root failure");
    assert_eq!(rt.block_on(|| survivor.join().unwrap()), "alive");
    assert_eq!(rt.block_on(|| fibra::spawn(|| 3).join().unwrap()), 3);
}

#[test]
fn cancel_unwinds_a_parked_fiber_and_runs_its_destructors() {
    let drops = DropCount::default();
    fibra::run(|| {
        let efd = Rc::new(EventFd::new(0).unwrap());
        let parks: Vec<Box<dyn Fn()>> = vec![
            Box::new(|| fibra::sleep(HOUR)),
            Box::new(move || drop(efd.read())),
            Box::new(|| {
                let (r, _w) = std::io::pipe().unwrap();
                use std::os::fd::AsRawFd;
                let _ = fibra::io::wait(r.as_raw_fd(), Interest::READABLE, None);
            }),
            Box::new(|| {
                let never = fibra::spawn(|| fibra::sleep(HOUR));
                let _ = never.join();
            }),
            Box::new(|| {
                loop {
                    fibra::yield_now();
                }
            }),
        ];
        let n = parks.len();
        let handles: Vec<_> = parks
            .into_iter()
            .map(|park| {
                let guard = drops.guard();
                fibra::spawn(move || {
                    let _guard = guard;
                    park();
                    unreachable!("a cancelled fiber went on");
                })
            })
            .collect();
        fibra::sleep(Duration::from_millis(10)); // all are parked now
        for h in &handles {
            h.cancel();
        }
        for h in handles {
            assert!(h.join().unwrap_err().is_cancelled());
        }
        assert_eq!(drops.get(), n);
    });
}

#[test]
fn cancelling_before_start_drops_the_closure_unrun() {
    let drops = DropCount::default();
    let ran = Rc::new(Cell::new(false));
    fibra::run(|| {
        let guard = drops.guard();
        let r = ran.clone();
        let h = fibra::spawn(move || {
            let _g = guard;
            r.set(true);
        });
        h.cancel();
        assert!(h.join().unwrap_err().is_cancelled());
    });
    assert!(!ran.get());
    assert_eq!(drops.get(), 1);
}

#[test]
fn cancel_from_another_thread() {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let h: fibra::JoinHandle<()> = rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        h.cancel();
        h.join().unwrap_err().is_cancelled()
    });
    let rt = fibra::Runtime::new().unwrap();
    let h = rt.spawn(|| fibra::sleep(HOUR));
    tx.send(h).unwrap();
    rt.run(); // ends when the fiber is cancelled
    assert!(t.join().unwrap());
}

#[test]
fn a_fiber_that_catches_its_cancellation_is_cancelled_again_at_its_next_park() {
    fibra::run(|| {
        let h = fibra::spawn(|| {
            let first = panic::catch_unwind(|| fibra::sleep(HOUR));
            assert!(first.is_err());
            fibra::sleep(HOUR); // unwinds again
        });
        fibra::yield_now();
        h.cancel();
        assert!(h.join().unwrap_err().is_cancelled());
    });
}

#[test]
fn timeout_unwinds_the_closure_and_runs_its_destructors() {
    let drops = DropCount::default();
    fibra::run(|| {
        let start = Instant::now();
        let guard = drops.guard();
        let r = fibra::timeout(Duration::from_millis(20), move || {
            let _g = guard;
            fibra::sleep(HOUR);
        });
        assert!(r.is_err());
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert!(start.elapsed() < Duration::from_secs(20));
        assert_eq!(drops.get(), 1);
        // The fiber goes on normally afterwards.
        fibra::sleep(Duration::from_millis(1));
        assert_eq!(fibra::timeout(HOUR, || 5), Ok(5));
    });
}

#[test]
fn nested_timeouts_the_earliest_wins() {
    fibra::run(|| {
        // Inner deadline first: the inner timeout reports it, the outer goes on.
        let outer = fibra::timeout(HOUR, || {
            let inner = fibra::timeout(Duration::from_millis(5), || fibra::sleep(HOUR));
            assert!(inner.is_err());
            "outer finished"
        });
        assert_eq!(outer, Ok("outer finished"));
        // Outer deadline first: the inner closure is unwound through.
        let reached = Cell::new(false);
        let outer = fibra::timeout(Duration::from_millis(5), || {
            let _ = fibra::timeout(HOUR, || fibra::sleep(HOUR));
            reached.set(true);
        });
        assert!(outer.is_err());
        assert!(!reached.get());
    });
}

#[test]
fn a_timeout_covers_io_waits_and_joins_and_passes_panics_through() {
    fibra::run(|| {
        let efd = EventFd::new(0).unwrap();
        assert!(fibra::timeout(Duration::from_millis(5), || efd.read()).is_err());
        let never = fibra::spawn(|| fibra::sleep(HOUR));
        assert!(fibra::timeout(Duration::from_millis(5), || never.join()).is_err());
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            fibra::timeout(HOUR, || panic!("inner panic"))
        }));
        assert_eq!(panic_message(caught.unwrap_err().as_ref()), "inner panic");
    });
}

#[test]
fn dropping_a_runtime_cancels_every_fiber_and_runs_all_destructors() {
    let drops = SyncDropCount::default();
    let rt = fibra::Runtime::new().unwrap();
    let efd = std::sync::Arc::new(EventFd::new(0).unwrap());
    let mut expected = 0;
    for i in 0..300 {
        let guard = drops.guard();
        let efd = efd.clone();
        rt.spawn(move || {
            let _g = guard;
            match i % 3 {
                0 => fibra::sleep(HOUR),
                1 => drop(efd.read()),
                _ => loop {
                    fibra::yield_now()
                },
            }
        });
        expected += 1;
    }
    // Let them all start and park.
    rt.turn(Some(Duration::ZERO));
    // A fiber whose destructor blocks briefly still finishes.
    struct SlowDrop {
        _guard: util::SyncDropGuard,
    }
    impl Drop for SlowDrop {
        fn drop(&mut self) {
            fibra::sleep(Duration::from_millis(5));
        }
    }
    let slow = SlowDrop {
        _guard: drops.guard(),
    };
    rt.spawn(move || {
        let _s = slow;
        fibra::sleep(HOUR);
    });
    expected += 1;
    rt.turn(Some(Duration::ZERO));
    // Fibers that never started are cancelled too.
    for _ in 0..50 {
        let guard = drops.guard();
        rt.spawn(move || drop(guard));
        expected += 1;
    }
    assert_eq!(drops.get(), 0);
    drop(rt);
    assert_eq!(drops.get(), expected);
}

#[test]
fn dropping_a_runtime_while_the_thread_panics_still_cancels_its_fibers() {
    let drops = SyncDropCount::default();
    let d = drops.clone();
    let r = std::thread::spawn(move || {
        let rt = fibra::Runtime::new().unwrap();
        for _ in 0..10 {
            let g = d.guard();
            rt.spawn(move || {
                let _g = g;
                loop {
                    fibra::yield_now();
                }
            });
        }
        rt.turn(Some(Duration::ZERO));
        panic!("the owner thread panics; unwinding drops the runtime");
    })
    .join();
    assert!(r.is_err());
    assert_eq!(drops.get(), 10);
}

#[test]
fn join_from_a_thread_and_from_a_fiber_of_another_runtime() {
    let (tx, rx) = std::sync::mpsc::channel();
    let producer = std::thread::spawn(move || {
        let rt = fibra::Runtime::new().unwrap();
        let a = rt.spawn(|| {
            fibra::sleep(Duration::from_millis(10));
            1
        });
        let b = rt.spawn(|| {
            fibra::sleep(Duration::from_millis(20));
            2
        });
        tx.send((a, b)).unwrap();
        rt.run();
    });
    let (a, b) = rx.recv().unwrap();
    // `a` is joined by this thread, `b` by a fiber of another runtime.
    let from_fiber = std::thread::spawn(move || fibra::run(|| b.join().unwrap()));
    assert_eq!(a.join().unwrap(), 1);
    assert_eq!(from_fiber.join().unwrap(), 2);
    producer.join().unwrap();
}

#[test]
fn joining_from_the_owner_thread_outside_the_runtime_panics_instead_of_hanging() {
    let rt = fibra::Runtime::new().unwrap();
    let h = rt.spawn(|| 1);
    let caught = panic::catch_unwind(AssertUnwindSafe(|| h.join()));
    let msg = panic_message(caught.unwrap_err().as_ref());
    assert!(msg.contains("would wait forever"), "{msg}");
    // A finished fiber joins fine from anywhere.
    let h = rt.spawn(|| 2);
    rt.run();
    assert_eq!(h.join().unwrap(), 2);
}

#[test]
fn scoped_fibers_borrow_and_are_all_joined() {
    let mut counter = 0;
    let names = vec!["a".to_string(), "b".to_string()];
    fibra::run(|| {
        let total = Cell::new(0);
        fibra::scope(|s| {
            for name in &names {
                let total = &total;
                s.spawn(move || {
                    fibra::sleep(Duration::from_millis(2));
                    total.set(total.get() + name.len());
                });
            }
        });
        assert_eq!(total.get(), 2);
        counter += total.get();
    });
    assert_eq!(counter, 2);
}

#[test]
fn a_scope_with_an_unjoined_panicking_fiber_panics_after_joining_all() {
    let finished = Cell::new(false);
    fibra::run(|| {
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            fibra::scope(|s| {
                s.spawn(|| panic!("scoped"));
                s.spawn(|| {
                    fibra::sleep(Duration::from_millis(10));
                    finished.set(true);
                });
            })
        }));
        assert!(r.is_err());
        assert!(finished.get(), "the scope returned before its fibers ended");
        // A joined panic is handled and does not make the scope panic.
        fibra::scope(|s| assert!(s.spawn(|| panic!("handled")).join().is_err()));
    });
}

#[test]
fn a_timeout_around_a_scope_cancels_its_fibers_before_unwinding() {
    let borrowed_until_the_end = Cell::new(0);
    fibra::run(|| {
        let r = fibra::timeout(Duration::from_millis(10), || {
            fibra::scope(|s| {
                for _ in 0..3 {
                    s.spawn(|| {
                        struct Mark<'a>(&'a Cell<i32>);
                        impl Drop for Mark<'_> {
                            fn drop(&mut self) {
                                self.0.set(self.0.get() + 1);
                            }
                        }
                        let _m = Mark(&borrowed_until_the_end);
                        fibra::sleep(HOUR);
                    });
                }
            })
        });
        assert!(r.is_err());
    });
    assert_eq!(borrowed_until_the_end.get(), 3);
}

#[test]
fn block_on_inside_a_fiber_panics_with_a_reason() {
    fibra::run(|| {
        let err = fibra::spawn(|| {
            let rt = fibra::Runtime::new().unwrap();
            rt.block_on(|| ());
        })
        .join()
        .unwrap_err();
        let msg = panic_message(err.into_panic().as_ref());
        assert!(msg.contains("cannot be called from a fiber"), "{msg}");
    });
}

#[test]
fn runtime_only_calls_panic_outside_a_runtime_with_a_reason() {
    for (name, f) in [
        (
            "fibra::spawn",
            Box::new(|| drop(fibra::spawn(|| ()))) as Box<dyn Fn()>,
        ),
        ("fibra::current", Box::new(|| drop(fibra::current()))),
        (
            "fibra::timeout",
            Box::new(|| {
                let _ = fibra::timeout(HOUR, || ());
            }),
        ),
        ("fibra::scope", Box::new(|| fibra::scope(|_| ()))),
    ] {
        let err = panic::catch_unwind(AssertUnwindSafe(f)).unwrap_err();
        let msg = panic_message(err.as_ref());
        assert!(
            msg.contains(name) && msg.contains("no fibra runtime"),
            "{msg}"
        );
    }
    assert!(fibra::Builder::new().spawn(|| ()).is_err());
}

#[test]
fn bad_stack_sizes_are_errors() {
    use std::io::ErrorKind::InvalidInput;
    fibra::run(|| {
        for size in [0, fibra::MAX_STACK_SIZE + 1, usize::MAX] {
            let err = fibra::Builder::new()
                .stack_size(size)
                .spawn(|| ())
                .unwrap_err();
            assert_eq!(err.kind(), InvalidInput, "{size}");
        }
        // Tiny sizes are rounded up to the minimum and work.
        let h = fibra::Builder::new().stack_size(1).spawn(|| 1).unwrap();
        assert_eq!(h.join().unwrap(), 1);
    });
    assert_eq!(
        fibra::Runtime::builder()
            .stack_size(0)
            .build()
            .unwrap_err()
            .kind(),
        InvalidInput
    );
}

#[test]
fn a_large_closure_is_kept_off_the_stack_top_and_still_runs() {
    // Over a quarter of the stack: kept off the stack (after its join
    // packet) rather than written at its top, so the stack holds only the
    // copy the call itself makes.
    fibra::run(|| {
        const SIZE: usize = fibra::DEFAULT_STACK_SIZE / 4 + 1024;
        let big = [7u8; SIZE];
        let h = fibra::spawn(move || big.iter().map(|&b| b as usize).sum::<usize>());
        assert_eq!(h.join().unwrap(), 7 * SIZE);
    });
}

#[test]
fn fibers_spawned_behind_a_long_queue_start_late_and_whole() {
    // Behind a few hundred queued fibers, a new one's start waits after
    // its join packet until its first run (its stack is touched only
    // then): results, names, panics, cancellation before the start, dumps
    // and a dropped runtime must not tell the difference.
    const N: usize = 1000;
    let drops = SyncDropCount::default();
    let rt = fibra::Runtime::new().unwrap();
    rt.block_on(|| {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let text = format!("result {i}");
                let guard = drops.guard();
                fibra::Builder::new()
                    .name(format!("late-{i}"))
                    .spawn(move || {
                        let _g = guard;
                        let name = format!("late-{i}");
                        assert_eq!(fibra::current().name(), Some(name.as_str()));
                        fibra::yield_now();
                        if i % 100 == 99 {
                            panic!("late failure {i}");
                        }
                        text
                    })
                    .unwrap()
            })
            .collect();
        // None has run yet: the dump lists the last one, queued, with the
        // place it was spawned from.
        let dump = rt.dump();
        let last = dump
            .fibers()
            .find(|f| f.name.as_deref() == Some("late-999"))
            .unwrap_or_else(|| panic!("not listed:\n{dump}"));
        assert_eq!(last.state, fibra::runtime::FiberState::Ready, "{dump}");
        assert!(
            last.spawned_at.unwrap().file().ends_with("lifecycle.rs"),
            "{dump}"
        );
        handles[600].cancel();
        for (i, h) in handles.into_iter().enumerate() {
            let outcome = h.join();
            if i == 600 {
                assert!(outcome.unwrap_err().is_cancelled());
            } else if i % 100 == 99 {
                let err = outcome.unwrap_err();
                assert!(err.is_panic(), "{err}");
                assert_eq!(err.name(), Some(format!("late-{i}").as_str()));
                assert!(
                    err.to_string().contains(&format!("late failure {i}")),
                    "{err}"
                );
            } else {
                assert_eq!(outcome.unwrap(), format!("result {i}"));
            }
        }
        assert_eq!(drops.get(), N);
    });
    // Dropping the runtime with hundreds never started drops each closure.
    for _ in 0..N {
        let guard = drops.guard();
        rt.spawn(move || drop(guard));
    }
    drop(rt);
    assert_eq!(drops.get(), 2 * N);
}

#[test]
fn names_ids_and_current() {
    fibra::run(|| {
        let root = fibra::current();
        assert!(root.name().is_none());
        let h = fibra::Builder::new()
            .name("worker-1".into())
            .spawn(|| {
                let me = fibra::current();
                (me.id(), me.name().unwrap().to_string())
            })
            .unwrap();
        let expected_id = h.fiber().id();
        let (id, name) = h.join().unwrap();
        assert_eq!(id, expected_id);
        assert_ne!(id, root.id());
        assert_eq!(name, "worker-1");
    });
}

#[test]
fn handles_joined_or_dropped_on_another_thread_while_fibers_finish() {
    // Every result is dropped exactly once, whichever side finishes last.
    let drops = SyncDropCount::default();
    let (tx, rx) = std::sync::mpsc::channel::<fibra::JoinHandle<util::SyncDropGuard>>();
    let d = drops.clone();
    let runtime = std::thread::spawn(move || {
        let rt = fibra::Runtime::new().unwrap();
        for i in 0..2000u64 {
            let g = d.guard();
            let h = rt.spawn(move || {
                for _ in 0..i % 3 {
                    fibra::yield_now();
                }
                g
            });
            tx.send(h).unwrap();
            if i % 100 == 0 {
                rt.turn(Some(Duration::ZERO));
            }
        }
        rt.run();
    });
    let mut joined = 0;
    for (i, h) in rx.iter().enumerate() {
        match i % 3 {
            0 => drop(h),
            1 => {
                drop(h.join().unwrap());
                joined += 1;
            }
            _ => {
                if h.is_finished() {
                    drop(h.join().unwrap());
                    joined += 1;
                }
            }
        }
    }
    runtime.join().unwrap();
    assert!(joined > 600);
    assert_eq!(drops.get(), 2000);
}

#[test]
fn a_join_cut_short_on_the_fibers_own_thread_leaves_the_result_to_be_dropped_once() {
    // A join from the fiber's own thread skips the packet's atomic updates;
    // a joiner unwound mid-join (timeout, cancel) must still leave the
    // result to the fiber, which frees it when it finishes.
    let drops = DropCount::default();
    fibra::run(|| {
        let d = drops.clone();
        let slow = fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(500));
            d.guard()
        });
        assert!(fibra::timeout(Duration::from_millis(2), || slow.join()).is_err());

        let d = drops.clone();
        let slow = fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(500));
            d.guard()
        });
        let joiner = fibra::spawn(move || slow.join().map(drop));
        fibra::yield_now(); // the joiner parks in join
        joiner.cancel();
        assert!(joiner.join().unwrap_err().is_cancelled());

        // And one joined to the end, for contrast.
        let d = drops.clone();
        drop(fibra::spawn(move || d.guard()).join().unwrap());
        assert_eq!(drops.get(), 1);
        // The two others finish (not cancelled by the runtime's end).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while drops.get() < 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "the slow ones never finish"
            );
            fibra::sleep(Duration::from_millis(10));
        }
    });
    assert_eq!(drops.get(), 3);
}
