//! The blocking pool and host-name lookups.

mod util;

use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::time::{Duration, Instant};

use util::panic_message;

#[test]
fn blocking_work_runs_off_the_runtime_thread_while_fibers_run() {
    fibra::run(|| {
        let ticks = Rc::new(std::cell::Cell::new(0));
        let t = ticks.clone();
        let ticker = fibra::spawn(move || {
            loop {
                fibra::sleep(Duration::from_millis(2));
                t.set(t.get() + 1);
            }
        });
        let here = std::thread::current().id();
        let (value, there) = fibra::spawn_blocking(|| {
            std::thread::sleep(Duration::from_millis(60));
            (42, std::thread::current().id())
        });
        assert_eq!(value, 42);
        assert_ne!(there, here, "ran on the runtime's thread");
        assert!(
            ticks.get() >= 5,
            "fibers did not run meanwhile: {}",
            ticks.get()
        );
        ticker.cancel();
    });
}

#[test]
fn many_blocking_calls_run_at_once() {
    fibra::run(|| {
        let start = Instant::now();
        let calls: Vec<_> = (0..40)
            .map(|i| {
                fibra::spawn(move || {
                    fibra::spawn_blocking(move || {
                        std::thread::sleep(Duration::from_millis(100));
                        i
                    })
                })
            })
            .collect();
        let sum: i32 = calls.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, (0..40).sum());
        // 40 x 100 ms one after another would be 4 s.
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
    });
}

#[test]
fn a_panic_in_blocking_work_is_reraised_in_the_fiber() {
    fibra::run(|| {
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            fibra::spawn_blocking(|| panic!("blocking boom"));
        }));
        assert_eq!(panic_message(r.unwrap_err().as_ref()), "blocking boom");
    });
}

#[test]
fn outside_a_runtime_it_runs_on_the_calling_thread() {
    let here = std::thread::current().id();
    assert_eq!(
        fibra::spawn_blocking(move || std::thread::current().id()),
        here
    );
}

#[test]
fn a_cancelled_waiter_unwinds_and_the_work_still_finishes() {
    let (tx, rx) = std::sync::mpsc::channel();
    fibra::run(|| {
        let h = fibra::spawn(move || {
            fibra::spawn_blocking(move || {
                std::thread::sleep(Duration::from_millis(50));
                tx.send("finished").unwrap();
            })
        });
        fibra::sleep(Duration::from_millis(10));
        h.cancel();
        assert!(h.join().unwrap_err().is_cancelled());
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        "finished"
    );
}

#[test]
fn connecting_by_host_name_resolves_on_the_pool() {
    fibra::run(|| {
        let listener = fibra::net::TcpListener::bind("localhost:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accept = fibra::spawn(move || listener.accept().map(|(_, a)| a.ip()));
        let s = fibra::net::TcpStream::connect(("localhost", port)).unwrap();
        assert!(s.peer_addr().unwrap().ip().is_loopback());
        assert!(accept.join().unwrap().unwrap().is_loopback());
        let err = fibra::net::TcpStream::connect("no-such-host.invalid:80").unwrap_err();
        assert_ne!(err.kind(), std::io::ErrorKind::WouldBlock, "{err:?}");
    });
}

#[test]
fn a_job_that_finishes_before_its_fiber_parks_leaves_no_stale_wake_up() {
    // When the pool finished a job before the fiber parked, its late wake-up
    // used to make the fiber's next park (here, a join) return early, and
    // the join then waited forever. Many runtimes and fast jobs make the
    // race likely; a watchdog turns a lost wake-up into a failure.
    let (done, finished) = std::sync::mpsc::channel();
    for _ in 0..3 {
        let done = done.clone();
        std::thread::spawn(move || {
            let n = fibra::run(|| {
                let hs: Vec<_> = (0..200)
                    .map(|i| {
                        fibra::spawn(move || {
                            let x = fibra::spawn_blocking(move || i);
                            let other = fibra::spawn(fibra::yield_now);
                            other.join().unwrap();
                            x
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
            });
            done.send(n).unwrap();
        });
    }
    for _ in 0..3 {
        let n = finished
            .recv_timeout(Duration::from_secs(60))
            .expect("a fiber waited forever: a wake-up was lost");
        assert_eq!(n, (0..200).sum::<usize>());
    }
}
