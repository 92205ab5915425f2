//! Generators: the classic examples, early drop, panics, and generators
//! inside fibers that block.

mod util;

use std::cell::{Cell, RefCell};
use std::os::unix::process::ExitStatusExt;
use std::rc::Rc;
use std::time::Duration;

use fibra::{Generator, Yielder};
use util::{DropCount, is_child, run_child};

enum Tree {
    Leaf(u32),
    Node(Box<Tree>, Box<Tree>),
}

fn leaf(v: u32) -> Box<Tree> {
    Box::new(Tree::Leaf(v))
}

fn node(l: Box<Tree>, r: Box<Tree>) -> Box<Tree> {
    Box::new(Tree::Node(l, r))
}

/// Recursion inside the generator: each leaf is yielded from deep down.
fn walk(tree: &Tree, y: &Yielder<u32>) {
    match tree {
        Tree::Leaf(v) => y.yield_(*v),
        Tree::Node(l, r) => {
            walk(l, y);
            walk(r, y);
        }
    }
}

/// Compares fringes leaf by leaf, stopping at the first difference. The
/// generators borrow the trees, so they are lent by `scoped`.
fn same_fringe(a: &Tree, b: &Tree) -> (bool, usize) {
    Generator::scoped(
        |y| walk(a, y),
        |fa| {
            Generator::scoped(
                |y| walk(b, y),
                |fb| {
                    let mut compared = 0;
                    loop {
                        match (fa.next(), fb.next()) {
                            (None, None) => return (true, compared),
                            (x, y) if x == y => compared += 1,
                            _ => return (false, compared),
                        }
                    }
                },
            )
        },
    )
}

#[test]
fn same_fringe_compares_trees_of_different_shapes_lazily() {
    let a = node(node(leaf(1), leaf(2)), node(leaf(3), leaf(4)));
    let b = node(leaf(1), node(leaf(2), node(leaf(3), leaf(4))));
    let c = node(leaf(1), node(leaf(9), node(leaf(3), leaf(4))));
    assert_eq!(same_fringe(&a, &b), (true, 4));
    assert_eq!(
        same_fringe(&a, &c),
        (false, 1),
        "stops at the first difference"
    );
    // The same inside a runtime, in a fiber.
    fibra::run(move || {
        let h = fibra::spawn(move || same_fringe(&a, &b).0);
        assert!(h.join().unwrap());
    });
}

#[test]
fn fibonacci_is_an_iterator() {
    let fib = Generator::new(|y| {
        let (mut a, mut b) = (0u64, 1u64);
        loop {
            y.yield_(a);
            (a, b) = (b, a + b);
        }
    });
    let v: Vec<u64> = fib.skip(10).step_by(10).take(3).collect();
    assert_eq!(v, [55, 6765, 832040]);
}

#[test]
fn dropping_a_generator_half_way_runs_its_destructors() {
    let drops = DropCount::default();
    let after = Rc::new(Cell::new(false));
    let (d, a) = (drops.clone(), after.clone());
    let mut g = Generator::new(move |y| {
        let _outer = d.guard();
        for i in 0.. {
            let _inner = d.guard();
            y.yield_(i);
        }
        a.set(true);
    });
    assert_eq!(g.next(), Some(0));
    assert_eq!(g.next(), Some(1));
    assert_eq!(drops.get(), 1, "one inner guard per finished round");
    drop(g);
    assert_eq!(drops.get(), 3, "the suspended frame was unwound");
    assert!(!after.get(), "the body must not run on after the drop");

    // A generator that never started drops its closure unrun.
    let drops = DropCount::default();
    let guard = drops.guard();
    let ran = Rc::new(Cell::new(false));
    let r = ran.clone();
    let g = Generator::<()>::new(move |_| {
        let _g = guard;
        r.set(true);
    });
    drop(g);
    assert_eq!(drops.get(), 1);
    assert!(!ran.get());
}

#[test]
fn a_panic_in_the_body_comes_out_of_next_and_ends_the_generator() {
    let mut g = Generator::new(|y| {
        y.yield_(1);
        panic!("generator failure");
    });
    assert_eq!(g.next(), Some(1));
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| g.next())).unwrap_err();
    assert_eq!(util::panic_message(&*err), "generator failure");
    assert!(g.is_finished());
    assert_eq!(g.next(), None);
}

#[test]
fn a_generator_body_that_sleeps_parks_its_fiber_while_others_run() {
    fibra::run(|| {
        let log = Rc::new(RefCell::new(Vec::new()));
        let l = log.clone();
        let ticker = fibra::spawn(move || {
            for i in 0..3 {
                fibra::sleep(Duration::from_millis(3));
                l.borrow_mut().push(format!("tick {i}"));
            }
        });
        let l = log.clone();
        let slow = Generator::new(move |y| {
            for i in 0..2 {
                fibra::sleep(Duration::from_millis(5)); // parks the fiber below
                l.borrow_mut().push(format!("made {i}"));
                y.yield_(i);
            }
        });
        let got: Vec<i32> = slow.collect();
        assert_eq!(got, [0, 1]);
        ticker.join().unwrap();
        let log = log.borrow();
        assert!(log.iter().any(|e| e.starts_with("tick")));
        assert_eq!(log.iter().filter(|e| e.starts_with("made")).count(), 2);
    });
}

#[test]
fn a_fiber_cancelled_while_parked_inside_a_generator_unwinds_both() {
    fibra::run(|| {
        let drops = DropCount::default();
        let d = drops.clone();
        let h = fibra::spawn(move || {
            let _fiber_guard = d.guard();
            let d2 = d.clone();
            let mut g = Generator::new(move |y| {
                let _gen_guard = d2.guard();
                y.yield_(1);
                fibra::sleep(Duration::from_secs(3600)); // cancelled here
                y.yield_(2);
            });
            assert_eq!(g.next(), Some(1));
            g.next();
            unreachable!("the fiber was cancelled");
        });
        fibra::sleep(Duration::from_millis(5));
        h.cancel();
        assert!(h.join().unwrap_err().is_cancelled());
        assert_eq!(
            drops.get(),
            2,
            "both the generator's and the fiber's frames unwound"
        );
    });
}

#[test]
fn nested_generators_and_many_of_them() {
    let outer = Generator::new(|y| {
        for i in 0..3u32 {
            let inner = Generator::new(move |yi| {
                for j in 0..3u32 {
                    yi.yield_(i * 10 + j);
                }
            });
            for v in inner {
                y.yield_(v);
            }
        }
    });
    assert_eq!(outer.count(), 9);
    // Stacks are pooled and returned: many in turn, and 200 alive at once.
    let mut alive: Vec<_> = (0..200u32)
        .map(|i| Generator::new(move |y| y.yield_(i)))
        .collect();
    let total: u32 = alive.iter_mut().map(|g| g.next().unwrap()).sum();
    assert_eq!(total, (0..200).sum());
    for i in 0..2_000u32 {
        assert_eq!(Generator::new(move |y| y.yield_(i)).next(), Some(i));
    }
}

#[test]
fn a_generator_overflow_is_reported() {
    fn recurse(y: &Yielder<u64>, depth: u64) -> u64 {
        let buf = std::hint::black_box([depth as u8; 512]);
        if std::hint::black_box(depth) == u64::MAX {
            y.yield_(0);
            return 0;
        }
        recurse(y, depth + 1) + buf[3] as u64
    }
    if is_child("a_generator_overflow_is_reported") {
        let mut g = Generator::with_stack_size(64 * 1024, |y| {
            recurse(y, 0);
        })
        .unwrap();
        g.next();
        unreachable!("the overflow did not abort");
    }
    let out = run_child("a_generator_overflow_is_reported");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fiber '<generator>' (id ")
            && stderr.contains("has overflowed its stack of 64 KiB"),
        "stderr:\n{stderr}"
    );
    assert_eq!(out.status.signal(), Some(libc::SIGABRT));
}

#[test]
fn bad_stack_sizes_are_errors() {
    assert!(Generator::<u8>::with_stack_size(0, |_| ()).is_err());
    assert!(Generator::<u8>::with_stack_size(usize::MAX, |_| ()).is_err());
}

#[test]
fn a_suspended_generator_dropped_while_its_fiber_unwinds_is_unwound_too() {
    fibra::run(|| {
        let drops = DropCount::default();
        let d = drops.clone();
        let h = fibra::spawn(move || {
            let d2 = d.clone();
            let mut g = Generator::new(move |y| {
                let _gen_guard = d2.guard();
                loop {
                    y.yield_(());
                }
            });
            g.next();
            let _fiber_guard = d.guard();
            fibra::sleep(Duration::from_secs(3600)); // cancelled here
            drop(g);
        });
        fibra::sleep(Duration::from_millis(5));
        h.cancel();
        assert!(h.join().unwrap_err().is_cancelled());
        assert_eq!(drops.get(), 2, "the generator's frame was not unwound");
    });
}

#[test]
fn a_panicking_fiber_unwinds_the_generator_it_owns() {
    fibra::run(|| {
        let drops = DropCount::default();
        let d = drops.clone();
        let h = fibra::spawn(move || {
            let d2 = d.clone();
            let mut g = Generator::new(move |y| {
                let _gen_guard = d2.guard();
                y.yield_(1);
                y.yield_(2);
            });
            assert_eq!(g.next(), Some(1));
            panic!("the fiber fails while its generator is suspended");
        });
        assert!(h.join().unwrap_err().is_panic());
        assert_eq!(drops.get(), 1);
    });
}
