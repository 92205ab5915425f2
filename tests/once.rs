//! `fibra::sync::OnceLock` and `LazyLock`: one initialisation, however many
//! fibers and threads ask at once; the others wait parked, not running an
//! initializer of their own.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use fibra::sync::{LazyLock, OnceLock};

/// Runs `f` on a thread of its own and fails if it takes over 30 s: a hang
/// fails the test instead of blocking the run.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(result);
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(value)) => value,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("the test did not finish within 30 s"),
    }
}

#[test]
fn a_second_fiber_parks_until_the_first_initialisation_completes() {
    // How long the first initializer parks. The ticker's five sleeps of
    // 1 ms must end within it: had the initializer blocked the thread, the
    // ticker could only start after it. 400 ms, not 50: a loaded machine
    // that holds each tick up 10 ms makes five of them take all of 50.
    const INIT: Duration = Duration::from_millis(400);
    bounded(|| {
        fibra::run(|| {
            let cell = Arc::new(OnceLock::new());
            let inits = Arc::new(AtomicUsize::new(0));
            let started = Instant::now();
            let first = {
                let (cell, inits) = (cell.clone(), inits.clone());
                fibra::spawn(move || {
                    *cell.get_or_init(|| {
                        inits.fetch_add(1, Ordering::SeqCst);
                        fibra::sleep(INIT); // parks mid-init
                        "first"
                    })
                })
            };
            fibra::yield_now(); // `first` is now parked inside its initializer
            // Meanwhile the runtime runs other fibers: this one, for one.
            let ticker = fibra::spawn(|| {
                for _ in 0..5 {
                    fibra::sleep(Duration::from_millis(1));
                }
                Instant::now()
            });
            let second = {
                let (cell, inits) = (cell.clone(), inits.clone());
                fibra::spawn(move || {
                    let value = *cell.get_or_init(|| {
                        inits.fetch_add(1, Ordering::SeqCst);
                        "second"
                    });
                    (value, Instant::now())
                })
            };
            assert_eq!(first.join().unwrap(), "first");
            let (value, at) = second.join().unwrap();
            assert_eq!(value, "first", "the second fiber got the first's value");
            assert!(at - started >= INIT, "it waited");
            assert_eq!(inits.load(Ordering::SeqCst), 1, "one initializer ran");
            let ticker_end = ticker.join().unwrap();
            assert!(
                ticker_end - started < INIT,
                "other fibers ran while the initializer was parked: the ticker ended {:?} in",
                ticker_end - started
            );
            assert_eq!(cell.get(), Some(&"first"));
        });
    });
}

#[test]
fn two_workers_and_a_plain_thread_share_one_initialisation() {
    bounded(|| {
        let cell: Arc<OnceLock<u64>> = Arc::new(OnceLock::new());
        let inits = Arc::new(AtomicUsize::new(0));
        let rt = fibra::Runtime::builder().workers(2).build().unwrap();
        let get = {
            let (cell, inits) = (cell.clone(), inits.clone());
            move |who: u64| {
                *cell.get_or_init(|| {
                    inits.fetch_add(1, Ordering::SeqCst);
                    fibra::sleep(Duration::from_millis(30));
                    who
                })
            }
        };
        let mut handles = Vec::new();
        for w in 0..2 {
            for i in 0..3 {
                let get = get.clone();
                handles.push(rt.spawn_on(w, move || get(10 * w as u64 + i)));
            }
        }
        let thread = {
            let get = get.clone();
            std::thread::spawn(move || get(99))
        };
        let mut seen: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        seen.push(thread.join().unwrap());
        assert_eq!(inits.load(Ordering::SeqCst), 1, "one initializer ran");
        assert!(seen.iter().all(|&v| v == seen[0]), "{seen:?}");
        assert_eq!(cell.get(), Some(&seen[0]));
    });
}

#[test]
fn an_initializer_that_panics_leaves_the_cell_empty_and_a_waiter_retries() {
    bounded(|| {
        fibra::run(|| {
            let cell = Arc::new(OnceLock::new());
            let failing = {
                let cell = cell.clone();
                fibra::spawn(move || {
                    *cell.get_or_init(|| {
                        fibra::sleep(Duration::from_millis(20));
                        panic!("the first initializer fails");
                    })
                })
            };
            fibra::yield_now(); // parked inside the failing initializer
            let waiter = {
                let cell = cell.clone();
                fibra::spawn(move || *cell.get_or_init(|| 2))
            };
            let err = failing.join().unwrap_err();
            assert!(err.is_panic());
            assert_eq!(waiter.join().unwrap(), 2, "the waiter ran its own");
            assert_eq!(cell.get(), Some(&2));
        });
        // And from a thread, without a runtime: the same.
        let cell = OnceLock::new();
        let r = std::panic::catch_unwind(|| cell.get_or_init(|| -> u8 { panic!("no") }));
        assert!(r.is_err());
        assert_eq!(cell.get(), None);
        assert_eq!(cell.get_or_init(|| 7), &7);
    });
}

#[test]
fn a_cancelled_waiter_leaves_and_the_initialisation_completes() {
    bounded(|| {
        fibra::run(|| {
            let cell = Arc::new(OnceLock::new());
            let init = {
                let cell = cell.clone();
                fibra::spawn(move || {
                    *cell.get_or_init(|| {
                        // Long enough that the 1 ms wait below ends first
                        // even under AddressSanitizer (30 ms did not: the
                        // initialisation was done by then).
                        fibra::sleep(Duration::from_millis(500));
                        1
                    })
                })
            };
            fibra::yield_now();
            let waiter = {
                let cell = cell.clone();
                fibra::spawn(move || *cell.get_or_init(|| 2))
            };
            fibra::yield_now(); // parked waiting
            waiter.cancel();
            assert!(waiter.join().unwrap_err().is_cancelled());
            let timed = {
                let cell = cell.clone();
                fibra::timeout(Duration::from_millis(1), move || *cell.wait())
            };
            assert!(timed.is_err(), "waiting can time out");
            assert_eq!(init.join().unwrap(), 1);
            assert_eq!(*cell.wait(), 1);
        });
    });
}

#[test]
fn lazy_lock_runs_its_function_once_for_many_fibers() {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    static LAZY: LazyLock<String> = LazyLock::new(|| {
        CALLS.fetch_add(1, Ordering::SeqCst);
        fibra::sleep(Duration::from_millis(20));
        "made".to_string()
    });
    bounded(|| {
        fibra::run(|| {
            let fibers: Vec<_> = (0..16).map(|_| fibra::spawn(|| LAZY.len())).collect();
            for f in fibers {
                assert_eq!(f.join().unwrap(), 4);
            }
        });
        assert_eq!(CALLS.load(Ordering::SeqCst), 1);
        assert_eq!(LazyLock::force(&LAZY), "made");
    });
}

#[test]
fn lazy_lock_is_poisoned_by_a_panicking_function() {
    bounded(|| {
        let lazy: LazyLock<u32> = LazyLock::new(|| panic!("broken"));
        let first = std::panic::catch_unwind(|| *lazy);
        assert!(first.is_err());
        let again = std::panic::catch_unwind(|| *lazy).unwrap_err();
        let message = again.downcast_ref::<&str>().copied().unwrap_or_default();
        assert!(message.contains("poisoned"), "{message}");
    });
}

#[test]
fn the_cells_are_send_and_sync_like_std() {
    fn both<T: Send + Sync>() {}
    both::<OnceLock<Vec<u8>>>();
    both::<LazyLock<Vec<u8>>>();
    let mut cell = OnceLock::from(3);
    assert_eq!(cell.take(), Some(3));
    assert_eq!(format!("{cell:?}"), "OnceLock(<uninit>)");
}
