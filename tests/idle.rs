//! Idle fibers: they run only when nothing else is ready, and never delay
//! timers or I/O.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

#[test]
fn an_idle_fiber_never_runs_while_a_normal_fiber_is_ready() {
    fibra::run(|| {
        let turns = Rc::new(Cell::new(0u64));
        let t = turns.clone();
        let idle = fibra::Builder::new()
            .idle(true)
            .spawn(move || {
                loop {
                    t.set(t.get() + 1);
                    fibra::yield_now();
                }
            })
            .unwrap();
        let busy: Vec<_> = (0..3)
            .map(|_| {
                let turns = turns.clone();
                fibra::spawn(move || {
                    for _ in 0..1000 {
                        assert_eq!(turns.get(), 0, "the idle fiber ran while others were ready");
                        fibra::yield_now();
                    }
                })
            })
            .collect();
        for b in busy {
            b.join().unwrap();
        }
        assert_eq!(turns.get(), 0);

        // Nothing else is ready while the root sleeps: the idle fiber runs,
        // and the sleep ends on time.
        let start = Instant::now();
        fibra::sleep(Duration::from_millis(50));
        let slept = start.elapsed();
        assert!(turns.get() > 0, "the idle fiber never ran");
        assert!(
            slept < Duration::from_millis(250),
            "the sleep was delayed: {slept:?}"
        );
        idle.cancel();
        assert!(idle.join().unwrap_err().is_cancelled());
    });
}

#[test]
fn an_idle_fiber_that_parks_comes_back_as_idle() {
    fibra::run(|| {
        let order = Rc::new(std::cell::RefCell::new(Vec::new()));
        let o = order.clone();
        let idle = fibra::Builder::new()
            .idle(true)
            .spawn(move || {
                fibra::sleep(Duration::from_millis(5));
                o.borrow_mut().push("idle");
            })
            .unwrap();
        let o = order.clone();
        let normal = fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(5));
            o.borrow_mut().push("normal");
        });
        normal.join().unwrap();
        idle.join().unwrap();
        assert_eq!(*order.borrow(), ["normal", "idle"]);
    });
}
