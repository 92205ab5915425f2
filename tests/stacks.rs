//! Every fiber's stack in a dump (`FiberInfo::stack`, issue 48): walked
//! from a parked fiber's saved switch frame without running it, the asking
//! fiber's own, fibra's frames folded away. Run in debug and release
//! (`cargo test --release --test stacks`: inlined frames, as std shows
//! them).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use fibra::runtime::{Dump, FiberInfo, FiberState, StackTrace};

mod util;

use util::locks::{self, LINE_A, LINE_B, lock_a_then_b, lock_b_then_a};

/// The functions of a fiber's stack, innermost first.
fn functions(stack: &StackTrace) -> Vec<&str> {
    stack.frames().iter().filter_map(|f| f.function()).collect()
}

/// The frame of `stack` in function `name` (its last path segment, with
/// any closure after it), if there is one.
fn frame_in<'a>(stack: &'a StackTrace, name: &str) -> Option<&'a fibra::runtime::StackFrame> {
    stack.frames().iter().find(|f| {
        f.function()
            .is_some_and(|n| n.split("::").any(|segment| segment == name))
    })
}

/// The fiber of `dump` named `name`.
fn fiber<'a>(dump: &'a Dump, name: &str) -> &'a FiberInfo {
    dump.fibers()
        .find(|f| f.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no fiber {name:?} in\n{dump}"))
}

/// Asserts that `name`'s stack names `function`, at `line` of `locks.rs`,
/// and that fibra's park is folded to the one call the user made.
fn assert_waits_in(dump: &Dump, name: &str, function: &str, line: u32) {
    let fiber = fiber(dump, name);
    let stack = fiber
        .stack
        .as_ref()
        .unwrap_or_else(|| panic!("fiber {name:?} has no stack in\n{dump}"));
    let frame = frame_in(stack, function)
        .unwrap_or_else(|| panic!("{name:?}'s stack does not name {function}:\n{dump}"));
    assert!(
        frame.file().is_some_and(|f| f.ends_with(locks::FILE)),
        "{frame:?} in\n{dump}"
    );
    assert_eq!(frame.line(), Some(line), "{frame:?} in\n{dump}");
    // Folded: no frame of fibra's park or of the fiber's start is shown.
    for f in functions(stack) {
        assert!(
            !f.contains("fibra::scheduler")
                && !f.contains("fibra::arch")
                && !f.contains("fibra_0_1"),
            "{f} not folded in\n{dump}"
        );
    }
    let text = dump.to_string();
    assert!(text.contains(&format!("{}:{line}:", locks::FILE)), "{text}");
}

/// Two fibers lock two mutexes in opposite orders: a real deadlock. A dump
/// taken from another thread shows both stacks, each naming its function
/// and the line where it waits.
#[test]
fn a_deadlock_shows_where_each_fiber_waits() {
    let rt = fibra::Runtime::builder().workers(1).build().unwrap();
    let a = Arc::new(fibra::sync::Mutex::new(0));
    let b = Arc::new(fibra::sync::Mutex::new(0));
    let both = Arc::new(fibra::sync::Barrier::new(2));
    for (name, first) in [("a-then-b", true), ("b-then-a", false)] {
        let (a, b, both) = (a.clone(), b.clone(), both.clone());
        rt.spawn_named(name, move || {
            if first {
                lock_a_then_b(&a, &b, &both)
            } else {
                lock_b_then_a(&a, &b, &both)
            }
        });
    }
    let dump = wait_for(&rt, |dump| {
        dump.fibers()
            .filter(|f| f.waiting_on.as_deref() == Some("Mutex::lock"))
            .count()
            == 2
    });
    println!("{dump}");
    assert_waits_in(
        &dump,
        "a-then-b",
        "lock_a_then_b",
        LINE_A.load(Ordering::Relaxed),
    );
    assert_waits_in(
        &dump,
        "b-then-a",
        "lock_b_then_a",
        LINE_B.load(Ordering::Relaxed),
    );
    // The user's call into fibra stays: the lock it waits in.
    let stack = fiber(&dump, "a-then-b").stack.as_ref().unwrap();
    // (`Mutex<T>::lock`, or `lock<u32>` where it is inlined in a release
    // build with line tables only, as std's backtraces name it too.)
    assert!(functions(stack)[0].contains("lock"), "{stack}");
    std::mem::forget(rt); // deadlocked for good: leave it
}

/// Dumps `rt` from this thread until `done` holds for a complete dump.
fn wait_for(rt: &fibra::Runtime<fibra::runtime::Workers>, done: impl Fn(&Dump) -> bool) -> Dump {
    let start = Instant::now();
    loop {
        let dump = rt.dump();
        if dump.is_complete() && done(&dump) {
            return dump;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "never got there:\n{dump}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

trait SpawnNamed {
    fn spawn_named(&self, name: &str, f: impl FnOnce() + Send + 'static);
}

impl SpawnNamed for fibra::Runtime<fibra::runtime::Workers> {
    fn spawn_named(&self, name: &str, f: impl FnOnce() + Send + 'static) {
        let name = name.to_owned();
        self.spawn(move || {
            fibra::Builder::new().name(name).spawn(f).unwrap();
        });
    }
}

#[inline(never)]
fn asks_for_a_dump(rt: &fibra::Runtime) -> (Dump, u32) {
    (rt.dump(), line!())
}

#[inline(never)]
fn asks_workers_for_a_dump(rt: &fibra::Runtime<fibra::runtime::Workers>) -> (Dump, u32) {
    (rt.dump(), line!())
}

/// The fiber that asks for the dump shows its own stack, from its call of
/// `dump` out; so does `block_on`'s closure asking, and a fiber of a
/// worker asking its runtime of workers.
#[test]
fn the_fiber_asking_shows_its_own_stack() {
    let check = |dump: &Dump, asker: &FiberInfo, line: u32| {
        assert_eq!(asker.state, FiberState::Running, "{dump}");
        let stack = asker.stack.as_ref().expect("the asker has a stack");
        let names = functions(stack);
        // Its call into fibra (the dump), then the function that asked.
        assert!(names[0].ends_with("dump"), "{dump}");
        let frame = &stack.frames()[1];
        assert!(
            frame.function().unwrap().ends_with("asks_for_a_dump"),
            "{dump}"
        );
        assert_eq!(frame.line(), Some(line), "{dump}");
    };
    let rt = fibra::Runtime::new().unwrap();
    rt.block_on(|| {
        fibra::scope(|s| {
            s.spawn(|| {
                let (dump, line) = asks_for_a_dump(&rt);
                println!("{dump}");
                let asker = dump
                    .fibers()
                    .find(|f| !f.root && f.state == FiberState::Running);
                check(&dump, asker.expect("the asker is listed"), line);
            });
        });
    });
    rt.block_on(|| {
        let (dump, line) = asks_for_a_dump(&rt);
        println!("{dump}");
        let root = dump
            .fibers()
            .find(|f| f.root)
            .expect("block_on's closure is listed");
        check(&dump, root, line);
    });
    let workers = fibra::Runtime::builder().workers(2).build().unwrap();
    let (dump, line) = workers.block_on(|| asks_workers_for_a_dump(&workers));
    println!("{dump}");
    let asker = dump
        .fibers()
        .find(|f| f.state == FiberState::Running)
        .unwrap();
    let frame = &asker.stack.as_ref().unwrap().frames()[1];
    assert!(
        frame
            .function()
            .unwrap()
            .ends_with("asks_workers_for_a_dump"),
        "{dump}"
    );
    assert_eq!(frame.line(), Some(line), "{dump}");
}

#[inline(never)]
fn waits_for_its_turn(rx: fibra::sync::oneshot::Receiver<()>) {
    let _ = rx.recv();
    not_a_tail_call("waits_for_its_turn");
}

/// Keeps the frame of the function that calls it last: a call in tail
/// position may be made a jump in release builds, and its caller's frame
/// then is not on the stack to show.
/// (`who` keeps the callers' code apart: two functions whose code is the
/// same may be folded into one, and named as either.)
#[inline(never)]
fn not_a_tail_call(who: &str) {
    std::hint::black_box(who);
}

/// A dump of 10 000 parked fibers walks every stack; the time it takes,
/// and per fiber, printed (the first dump loads the debug info; the second
/// is what later ones cost). Generous bounds: this is a shared machine.
#[test]
fn a_dump_of_ten_thousand_parked_fibers() {
    const FIBERS: usize = 10_000;
    let rt = fibra::Runtime::new().unwrap();
    let mut senders = Vec::with_capacity(FIBERS);
    for _ in 0..FIBERS {
        let (tx, rx) = fibra::sync::oneshot::channel();
        senders.push(tx);
        rt.spawn(move || waits_for_its_turn(rx));
    }
    while rt.turn(Some(Duration::ZERO)) > 0 {}
    for round in ["first", "second"] {
        let start = Instant::now();
        let dump = rt.dump();
        let took = start.elapsed();
        println!(
            "{round} dump of {FIBERS} parked fibers: {took:.1?}, {:.2} µs a fiber",
            took.as_secs_f64() * 1e6 / FIBERS as f64
        );
        assert_eq!(dump.fibers().count(), FIBERS);
        for f in dump.fibers() {
            let stack = f.stack.as_ref().expect("every parked fiber has a stack");
            assert!(frame_in(stack, "waits_for_its_turn").is_some(), "{stack}");
        }
        assert!(took < Duration::from_secs(60), "{took:?}");
    }
    let text = rt.dump().to_string();
    assert_eq!(text.matches("waits_for_its_turn").count(), FIBERS);
    for tx in senders {
        let _ = tx.send(());
    }
    rt.run();
}

/// The SIGQUIT dump (`dump_on_sigquit`, in a child process) shows the
/// stacks too: of a spawned fiber, and of `block_on`'s closure parked
/// under its runtime's loop, which answers the dump on the same stack.
/// The child waits for good; it is killed once its dump is read (naming
/// the frames takes its time: the debug info is loaded then, seconds
/// under a sanitizer).
#[test]
fn the_sigquit_dump_shows_stacks() {
    const NAME: &str = "the_sigquit_dump_shows_stacks";
    if util::is_child(NAME) {
        fibra::runtime::dump_on_sigquit().unwrap();
        fibra::run(|| {
            let _sleeper = fibra::Builder::new()
                .name("sleeper".into())
                .spawn(sleeps_in_a_named_function)
                .unwrap();
            let (tx, rx) = fibra::sync::oneshot::channel::<()>();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                // SAFETY: raising a signal fibra handles now.
                unsafe { libc::raise(libc::SIGQUIT) };
                std::thread::sleep(Duration::from_secs(3600));
                drop(tx);
            });
            the_root_waits(rx);
        });
        return;
    }
    // Until the dump's last fiber (the sleeper) and its frame's line.
    let stderr = util::child_stderr_until(NAME, Duration::from_secs(120), |text| {
        text.find("sleeps_in_a_named_function")
            .is_some_and(|at| text[at..].contains("tests/stacks.rs:") && text[at..].contains('\n'))
    });
    println!("{stderr}");
    assert!(stderr.contains("fibra: SIGQUIT: fiber dump"), "{stderr}");
    let root = stderr
        .find("(block_on) [parked")
        .expect("the root is listed");
    let sleeper = stderr
        .find("\"sleeper\" [parked")
        .expect("the sleeper is listed");
    let (root_part, sleeper_part) = if root < sleeper {
        (&stderr[root..sleeper], &stderr[sleeper..])
    } else {
        (&stderr[root..], &stderr[sleeper..root])
    };
    assert!(root_part.contains("the_root_waits"), "{stderr}");
    assert!(
        sleeper_part.contains("sleeps_in_a_named_function"),
        "{stderr}"
    );
    // The loop that answered, under the root's park, is folded away.
    assert!(!stderr.contains("fibra::scheduler"), "{stderr}");
    assert!(!stderr.contains("run_root"), "{stderr}");
}

#[inline(never)]
fn sleeps_in_a_named_function() {
    fibra::sleep(Duration::from_secs(60));
    not_a_tail_call("sleeps_in_a_named_function");
}

#[inline(never)]
fn the_root_waits(rx: fibra::sync::oneshot::Receiver<()>) {
    let _ = rx.recv();
    not_a_tail_call("the_root_waits");
}

static LINE_GENERATOR: AtomicU32 = AtomicU32::new(0);

#[inline(never)]
fn yields_from_a_generator() -> u32 {
    let numbers = fibra::Generator::new(|y: &fibra::Yielder<u32>| {
        LINE_GENERATOR.store(line!() + 1, Ordering::Relaxed);
        fibra::sleep(Duration::from_secs(60));
        y.yield_(1);
    });
    numbers.sum()
}

/// A fiber that has not started has no stack yet; one parked inside a
/// generator shows the generator's frames (its stack is the generator's
/// while it drives it); a ready one shows where it yielded.
#[test]
fn fibers_not_started_ready_and_in_a_generator() {
    let rt = fibra::Runtime::new().unwrap();
    rt.block_on(|| {
        let _gen = fibra::Builder::new()
            .name("in-generator".into())
            .spawn(yields_from_a_generator)
            .unwrap();
        let _yielder = fibra::Builder::new()
            .name("yielder".into())
            .spawn(|| {
                loop {
                    fibra::yield_now();
                }
            })
            .unwrap();
        fibra::yield_now(); // both run and park (or yield)
        let _new = fibra::Builder::new()
            .name("new".into())
            .spawn(|| ())
            .unwrap();
        let dump = rt.dump();
        println!("{dump}");
        assert!(fiber(&dump, "new").stack.is_none(), "{dump}");
        // The generator's body, where it sleeps (named `{{closure}}` of
        // `yields_from_a_generator`, or `{closure#0}` in release).
        let in_gen = fiber(&dump, "in-generator").stack.as_ref().unwrap();
        let line = LINE_GENERATOR.load(Ordering::Relaxed);
        assert!(
            in_gen.frames().iter().any(|f| f.line() == Some(line)),
            "{dump}"
        );
        let yielder = fiber(&dump, "yielder");
        assert_eq!(yielder.state, FiberState::Ready, "{dump}");
        assert!(
            functions(yielder.stack.as_ref().unwrap())[0].contains("yield_now"),
            "{dump}"
        );
    });
    drop(rt); // cancels them
}
