//! The holes a generator could open through the safe API (a suspended frame
//! carried out of its runtime, its scope or its borrows), each now refused.
//!
//! Each scenario runs in a child process: before the fixes these crashed
//! (SIGSEGV, or a use-after-free that ASan reports), which must fail one
//! test, not the whole test binary. The compile-time half (a leakable
//! generator cannot borrow; a scoped one cannot be swapped out; a
//! `ScopedJoinHandle` is `!Send`) is in `compile_fail` doctests on
//! `Generator` and `ScopedJoinHandle`.

mod util;

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fibra::{Generator, Yielder};
use util::{assert_child_ok, is_child, panic_message};

/// Runs `scenario` when this process is the child for test `name`, and
/// otherwise runs the child and checks that it ended well.
fn in_child(name: &str, scenario: impl FnOnce()) {
    if is_child(name) {
        scenario();
        println!("CHILD OK");
    } else {
        assert_child_ok(name);
    }
}

/// Runs `f`, which must panic with a message containing `expected`.
#[track_caller]
fn expect_panic(expected: &str, f: impl FnOnce()) {
    let payload = panic::catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    let msg = panic_message(&*payload);
    assert!(
        msg.contains(expected),
        "panic message {msg:?} lacks {expected:?}"
    );
}

/// Whether this thread is inside a runtime (`fibra::current` panics outside one).
fn in_runtime() -> bool {
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let inside = panic::catch_unwind(fibra::current).is_ok();
    panic::set_hook(hook);
    inside
}

// ----- hole 1: a suspended frame that holds a runtime ----------------------

#[test]
fn a_generator_cannot_yield_inside_a_scope_and_be_resumed_after_the_runtime() {
    in_child(
        "a_generator_cannot_yield_inside_a_scope_and_be_resumed_after_the_runtime",
        || {
            // The audit's program: the body opens a scope and yields in it;
            // the generator leaves `run` and is resumed afterwards, when the
            // scope's runtime is gone. The yield is refused instead.
            let spawned = std::rc::Rc::new(std::cell::Cell::new(0));
            let seen = spawned.clone();
            let mut g = fibra::run(move || {
                let mut g = Generator::new(move |y: &Yielder<u32>| {
                    fibra::scope(|s| {
                        y.yield_(1);
                        s.spawn(|| seen.set(seen.get() + 1));
                    });
                });
                expect_panic("inside `fibra::scope`", || {
                    g.next();
                });
                g
            });
            assert!(g.is_finished(), "the refused body ended with its panic");
            assert_eq!(g.next(), None);
            assert_eq!(spawned.get(), 0);
        },
    );
}

#[test]
fn a_generator_cannot_yield_out_of_a_runtime_it_entered() {
    in_child(
        "a_generator_cannot_yield_out_of_a_runtime_it_entered",
        || {
            // The body enters a runtime and yields inside it: that would
            // leave the thread's context pointing at the runtime after the
            // yield. Refused, and the context is clear afterwards.
            let mut g = Generator::new(|y: &Yielder<()>| fibra::run(|| y.yield_(())));
            expect_panic("`block_on`/`run`", || {
                g.next();
            });
            assert!(!in_runtime(), "no runtime context is left behind");
            // And a scope outside any runtime panics cleanly.
            expect_panic("no fibra runtime", || fibra::scope(|_| ()));

            // The same with a runtime the caller made, by `block_on`.
            let rt = fibra::Runtime::new().unwrap();
            let mut g = Generator::new(move |y: &Yielder<()>| rt.block_on(|| y.yield_(())));
            expect_panic("`block_on`/`run`", || {
                g.next();
            });
            assert!(!in_runtime());
        },
    );
}

#[test]
fn a_generator_cannot_yield_inside_a_timeout() {
    in_child("a_generator_cannot_yield_inside_a_timeout", || {
        fibra::run(|| {
            let mut g = Generator::new(|y: &Yielder<u8>| {
                let _ = fibra::timeout(Duration::from_secs(60), || y.yield_(1));
            });
            expect_panic("`fibra::timeout`", || {
                g.next();
            });
            // The timeout's deadline did not leak onto this fiber.
            fibra::sleep(Duration::from_millis(5));
        });
    });
}

#[test]
fn a_generator_may_use_a_scope_and_a_runtime_between_its_yields() {
    // What stays allowed: a scope (or a nested runtime) that ends before the
    // body yields, and resuming the suspended body in another context.
    let data = [1u32, 2, 3];
    let mut g = fibra::run(|| {
        let mut g = Generator::new(move |y: &Yielder<u32>| {
            let sum = fibra::scope(|s| {
                let h = s.spawn(|| data.iter().sum::<u32>());
                h.join().unwrap()
            });
            y.yield_(sum);
            // Resumed outside the runtime: a runtime of its own.
            y.yield_(fibra::run(|| fibra::spawn(|| 7).join().unwrap()));
        });
        assert_eq!(g.next(), Some(6));
        g
    });
    assert_eq!(g.next(), Some(7));
    assert_eq!(g.next(), None);
}

// ----- hole 2: a leaked frame inside a scope that others borrow -----------

#[test]
fn a_scoped_generator_suspended_in_a_thread_scope_is_unwound_before_its_borrows_end() {
    let data: Vec<u64> = (1..=1000).collect();
    let read = AtomicUsize::new(0);
    let first = Generator::scoped(
        |y: &Yielder<u64>| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    // Reads the borrowed data while the body is suspended.
                    std::thread::sleep(Duration::from_millis(50));
                    let sum: u64 = data.iter().sum();
                    assert_eq!(sum, 500_500);
                    read.fetch_add(1, Ordering::SeqCst);
                });
                y.yield_(1);
                y.yield_(2); // never reached: dropped while suspended
            });
        },
        |g| g.next(),
    );
    // `scoped` unwound the body, and so joined the scope's thread, before
    // returning: the data is still alive here and was read in full.
    assert_eq!(first, Some(1));
    assert_eq!(read.load(Ordering::SeqCst), 1);
    drop(data);
}

#[test]
fn a_scoped_generator_is_unwound_when_its_closure_panics() {
    let dropped = std::cell::Cell::new(false);
    struct Flag<'a>(&'a std::cell::Cell<bool>);
    impl Drop for Flag<'_> {
        fn drop(&mut self) {
            self.0.set(true);
        }
    }
    expect_panic("boom", || {
        Generator::scoped(
            |y: &Yielder<()>| {
                let _flag = Flag(&dropped);
                y.yield_(());
            },
            |g| {
                g.next();
                panic!("boom");
            },
        )
    });
    assert!(dropped.get(), "the body's destructors ran");
}

// ----- hole 3: a Yielder used from another stack ---------------------------

#[test]
fn a_yielder_lent_to_a_scoped_fiber_cannot_yield() {
    in_child("a_yielder_lent_to_a_scoped_fiber_cannot_yield", || {
        fibra::run(|| {
            let message = std::rc::Rc::new(std::cell::RefCell::new(String::new()));
            let seen = message.clone();
            expect_panic("a scoped fiber panicked", || {
                Generator::scoped(
                    |y: &Yielder<u32>| {
                        fibra::scope(|s| {
                            let h = s.spawn(|| y.yield_(1));
                            if let Err(e) = h.join() {
                                *seen.borrow_mut() = panic_message(&*e.into_panic());
                            }
                            panic!("a scoped fiber panicked");
                        });
                    },
                    |g| g.next(),
                );
            });
            assert!(
                message.borrow().contains("outside its generator's body"),
                "{}",
                message.borrow()
            );
            // The runtime still works.
            assert_eq!(fibra::spawn(|| 5).join().unwrap(), 5);
        });
    });
}

#[test]
fn a_yielder_captured_by_a_nested_generator_cannot_yield() {
    in_child(
        "a_yielder_captured_by_a_nested_generator_cannot_yield",
        || {
            expect_panic("outside its generator's body", || {
                Generator::scoped(
                    |y: &Yielder<u32>| {
                        Generator::scoped(
                            |_inner: &Yielder<()>| y.yield_(1),
                            |inner| {
                                inner.next();
                            },
                        );
                    },
                    |g| {
                        g.next();
                    },
                );
            });
            // The outer generator's own yields still work, nested or not.
            let v: Vec<u32> = Generator::scoped(
                |y: &Yielder<u32>| {
                    y.yield_(1);
                    let inner: Vec<u32> =
                        Generator::scoped(|yi: &Yielder<u32>| yi.yield_(2), |g| g.collect());
                    y.yield_(inner[0]);
                },
                |g| g.collect(),
            );
            assert_eq!(v, [1, 2]);
        },
    );
}
