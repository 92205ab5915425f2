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

/// Under `Runtime::turn`: a turn that finds no normal fiber ready gives
/// each ready idle fiber one slice instead of waiting, and a turn that runs
/// a normal fiber gives them none.
#[test]
fn a_turn_with_nothing_else_ready_runs_each_idle_fiber_once() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};

    let rt = fibra::Runtime::new().unwrap();
    let slices = Arc::new([AtomicU32::new(0), AtomicU32::new(0)]);
    let normal = Arc::new(AtomicU32::new(0));
    let (s, n) = (slices.clone(), normal.clone());
    rt.spawn(move || {
        for i in 0..2 {
            let s = s.clone();
            let background = move || {
                loop {
                    s[i].fetch_add(1, SeqCst);
                    fibra::yield_now();
                }
            };
            fibra::Builder::new().idle(true).spawn(background).unwrap();
        }
        // Ready in the next turn (a turn runs the fibers ready at its start).
        fibra::spawn(move || {
            n.fetch_add(1, SeqCst);
            fibra::sleep(Duration::from_millis(30));
            n.fetch_add(1, SeqCst);
        });
    });
    let seen = || [slices[0].load(SeqCst), slices[1].load(SeqCst)];
    assert_eq!(rt.turn(Some(Duration::ZERO)), 1); // the spawner
    assert_eq!(seen(), [0, 0]);
    assert_eq!(rt.turn(Some(Duration::ZERO)), 1); // the normal fiber, which sleeps
    assert_eq!((normal.load(SeqCst), seen()), (1, [0, 0]));
    // Nothing else ready: one slice each, and no wait (`None` would wait
    // for the timer otherwise).
    assert_eq!(rt.turn(None), 2);
    assert_eq!(seen(), [1, 1]);
    // The idle fibers do not delay the sleeper's timer.
    let start = Instant::now();
    while normal.load(SeqCst) < 2 {
        rt.turn(None);
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the sleeper never woke"
        );
    }
    let took = start.elapsed();
    // (30 ms; a timer the idle fibers held up would not come at all.)
    assert!(
        took < Duration::from_secs(2),
        "the timer was delayed: {took:?}"
    );
    let [a, b] = seen();
    assert!(
        a >= 1 && a.abs_diff(b) <= 1,
        "one slice each per turn: {a} {b}"
    );
}
