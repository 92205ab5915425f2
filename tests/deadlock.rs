//! Deadlocks told (issue 48): a runtime all of whose fibers, its root
//! included, wait on fibra's own primitives with no timer armed and no fd
//! registered warns (target `fibra::deadlock`) after ten `stall_warning`s,
//! with its dump and stacks, as Go's "all goroutines are asleep". A
//! runtime with a sleeping fiber, or one waiting on a socket, never does.
//! A runtime of two workers is told when the fibers of both are stuck,
//! with both workers' dumps; never while one worker's fibers wait on a
//! fiber of the other that computes, sleeps or waits on a socket, nor
//! while a plain thread feeds them, nor at a wake-up in flight between
//! the two.

mod util;
mod warnings;

use std::sync::Arc;
use std::time::Duration;

use util::locks::{lock_a_then_b, lock_b_then_a};

const STALL: Duration = Duration::from_millis(20);

/// Runs `f` in a runtime of `STALL` on a thread named `name`, left behind
/// (a deadlocked one never ends).
fn on_a_thread(name: &str, f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let rt = fibra::Runtime::builder()
                .stall_warning(STALL)
                .build()
                .unwrap();
            rt.block_on(f);
        })
        .unwrap();
}

/// Two fibers that take two locks in opposite orders, joined by the root,
/// in a runtime on a thread named `name`.
fn two_mutexes_in_opposite_orders(name: &str) {
    on_a_thread(name, util::locks::deadlock_two_fibers);
}

#[test]
fn two_fibers_locking_two_mutexes_in_opposite_orders_are_told() {
    warnings::capture();
    two_mutexes_in_opposite_orders("deadlocked");
    let told = warnings::wait_for(
        "fibra::deadlock",
        &["thread=deadlocked"],
        Duration::from_secs(60),
    );
    assert!(!told.is_empty(), "not told: {:#?}", warnings::all());
    let text = &told[0].fields;
    println!("{text}");
    assert_eq!(told[0].level, tracing::Level::WARN);
    assert!(text.contains("deadlock"), "{text}");
    // The dump, with each fiber's stack naming the user's function.
    assert!(text.contains("lock_a_then_b"), "{text}");
    assert!(text.contains("lock_b_then_a"), "{text}");
    assert!(text.contains("Mutex::lock"), "{text}");
    assert!(text.contains("(block_on) [parked: join of fiber"), "{text}");
    // Told once, not at every wait.
    std::thread::sleep(STALL * 30);
    assert_eq!(
        warnings::seen("fibra::deadlock", &["thread=deadlocked"]).len(),
        1
    );
}

/// The deadlock warning's dump is named (its stacks symbolized) on the
/// runtime's thread, which takes long the first time in a process (the
/// debug info loads: tens of ms in a release build, hundreds in a debug
/// one), while every fiber waits: the runtime's own work while idle, not a
/// stall of the root's closure, which is parked in `join` all along.
#[test]
fn the_deadlock_warning_is_no_stall() {
    warnings::capture();
    two_mutexes_in_opposite_orders("no-stall");
    let told = warnings::wait_for(
        "fibra::deadlock",
        &["thread=no-stall "],
        Duration::from_secs(60),
    );
    assert!(!told.is_empty(), "not told: {:#?}", warnings::all());
    // Time for a stall warning about the naming, and for its end (told at
    // the wait that follows), to come if they were to.
    std::thread::sleep(STALL * 30);
    assert!(
        warnings::seen("fibra::stall", &["thread=no-stall "]).is_empty(),
        "{:#?}",
        warnings::all()
    );
}

/// A fiber waits on a lock whose holder sleeps: a timer is armed, the
/// sleeper will release it. Not a deadlock.
#[test]
fn a_sleeping_fiber_is_not_a_deadlock() {
    warnings::capture();
    let (tx, rx) = std::sync::mpsc::channel();
    on_a_thread("sleeping", move || {
        let m = Arc::new(fibra::sync::Mutex::new(0));
        let m2 = m.clone();
        let holder = fibra::spawn(move || {
            let _g = m2.lock().unwrap();
            fibra::sleep(STALL * 40);
        });
        fibra::yield_now();
        let waiter = fibra::spawn(move || *m.lock().unwrap());
        holder.join().unwrap();
        waiter.join().unwrap();
        tx.send(()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(
        warnings::seen("fibra::deadlock", &["thread=sleeping"]).is_empty(),
        "{:#?}",
        warnings::all()
    );
}

/// A fiber waits on a socket (another waits to join it): an fd is
/// registered, a peer may write. Not a deadlock.
#[test]
fn a_fiber_waiting_on_a_socket_is_not_a_deadlock() {
    warnings::capture();
    let (peer, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    on_a_thread("on-a-socket", move || {
        let reader = fibra::spawn(move || {
            let mut stream = fibra::net::UnixStream::from(theirs);
            let mut buf = [0; 1];
            std::io::Read::read(&mut stream, &mut buf).unwrap()
        });
        let joiner = fibra::spawn(move || reader.join().unwrap());
        joiner.join().unwrap();
    });
    std::thread::sleep(STALL * 40);
    assert!(
        warnings::seen("fibra::deadlock", &["thread=on-a-socket"]).is_empty(),
        "{:#?}",
        warnings::all()
    );
    std::io::Write::write_all(&mut &peer, b"x").unwrap();
}

// ----- runtimes of several workers ------------------------------------

/// A runtime of two workers with a stall warning of `stall`, left behind
/// by the tests (a deadlocked one never ends).
fn two_workers(stall: Duration) -> &'static fibra::Runtime<fibra::runtime::Workers> {
    let rt = fibra::Runtime::builder()
        .workers(2)
        .stall_warning(stall)
        .build()
        .unwrap();
    Box::leak(Box::new(rt))
}

/// Runs `f` on worker `worker` of `rt` in a fiber named `name` (spawned
/// by a fiber there, which joins it: `spawn_on` names none).
fn on_worker<T: Send + 'static>(
    rt: &fibra::Runtime<fibra::runtime::Workers>,
    worker: usize,
    name: &'static str,
    f: impl FnOnce() -> T + Send + 'static,
) -> fibra::JoinHandle<T> {
    rt.spawn_on(worker, move || {
        fibra::Builder::new()
            .name(name.into())
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    })
}

/// The deadlock warnings that name `fiber`.
fn told_of(fiber: &str) -> Vec<warnings::Seen> {
    warnings::seen("fibra::deadlock", &[fiber])
}

#[test]
fn two_fibers_on_two_workers_locking_two_mutexes_in_opposite_orders_are_told() {
    warnings::capture();
    let rt = two_workers(STALL);
    let a = Arc::new(fibra::sync::Mutex::new(0));
    let b = Arc::new(fibra::sync::Mutex::new(0));
    let both = Arc::new(fibra::sync::Barrier::new(2));
    let (a2, b2, both2) = (a.clone(), b.clone(), both.clone());
    on_worker(rt, 0, "w-a-then-b", move || lock_a_then_b(&a2, &b2, &both2));
    on_worker(rt, 1, "w-b-then-a", move || lock_b_then_a(&a, &b, &both));
    let told = warnings::wait_for(
        "fibra::deadlock",
        &["w-a-then-b", "w-b-then-a"],
        Duration::from_secs(60),
    );
    assert!(!told.is_empty(), "not told: {:#?}", warnings::all());
    let text = &told[0].fields;
    println!("{text}");
    assert_eq!(told[0].level, tracing::Level::WARN);
    assert!(text.contains("workers=2"), "{text}");
    // Both workers' dumps, each fiber's stack naming the user's function.
    assert!(text.contains("thread \"fibra-worker-0\""), "{text}");
    assert!(text.contains("thread \"fibra-worker-1\""), "{text}");
    assert!(text.contains("lock_a_then_b"), "{text}");
    assert!(text.contains("lock_b_then_a"), "{text}");
    assert!(text.contains("Mutex::lock"), "{text}");
    // Told once, by one worker, though each answered a dump since.
    std::thread::sleep(STALL * 30);
    assert_eq!(told_of("w-a-then-b").len(), 1, "{:#?}", warnings::all());
}

/// One worker's fibers all wait on a lock that a fiber of the other
/// worker holds while `hold` runs, then releases: that worker alone looks
/// deadlocked for the whole of `hold`; the runtime is not. `name` names
/// the waiter.
fn one_worker_waits_while_the_other(name: &'static str, hold: impl FnOnce() + Send + 'static) {
    let rt = two_workers(STALL);
    let m = Arc::new(fibra::sync::Mutex::new(0));
    let (locked_tx, locked) = std::sync::mpsc::channel();
    let m2 = m.clone();
    let holder = on_worker(rt, 0, "holder", move || {
        let _g = m2.lock().unwrap();
        locked_tx.send(()).unwrap();
        hold();
    });
    locked.recv().unwrap();
    let waiter = on_worker(rt, 1, name, move || *m.lock().unwrap());
    holder.join().unwrap();
    waiter.join().unwrap();
    // Long enough for a late warning to come.
    std::thread::sleep(STALL * 15);
    assert!(told_of(name).is_empty(), "{:#?}", warnings::all());
}

#[test]
fn a_lock_held_by_a_busy_fiber_of_another_worker_is_not_a_deadlock() {
    warnings::capture();
    one_worker_waits_while_the_other("waits-for-busy", || warnings::spin(STALL * 30));
}

#[test]
fn a_lock_held_by_a_sleeping_fiber_of_another_worker_is_not_a_deadlock() {
    warnings::capture();
    one_worker_waits_while_the_other("waits-for-sleeper", || fibra::sleep(STALL * 30));
}

#[test]
fn a_lock_held_by_a_fiber_of_another_worker_waiting_on_a_socket_is_not_a_deadlock() {
    warnings::capture();
    let (peer, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(STALL * 30);
        std::io::Write::write_all(&mut &peer, b"x").unwrap();
        peer
    });
    one_worker_waits_while_the_other("waits-for-reader", move || {
        let mut stream = fibra::net::UnixStream::from(theirs);
        let mut buf = [0; 1];
        std::io::Read::read(&mut stream, &mut buf).unwrap();
    });
    drop(writer.join().unwrap());
}

/// Fibers of both workers wait on channels only, with no timer and no fd,
/// fed by a plain thread every third of the warning's time: each message
/// is news, and the runtime is never still for ten stall times.
#[test]
fn fibers_of_two_workers_fed_by_a_plain_thread_are_not_a_deadlock() {
    warnings::capture();
    let stall = Duration::from_millis(50);
    let rt = two_workers(stall);
    let rounds = 30;
    let mut feeds = Vec::new();
    let mut eaters = Vec::new();
    for (worker, name) in [(0, "fed-0"), (1, "fed-1")] {
        let (tx, rx) = fibra::sync::mpsc::channel::<u32>();
        feeds.push(tx);
        eaters.push(on_worker(rt, worker, name, move || rx.iter().count()));
    }
    for _ in 0..rounds {
        std::thread::sleep(stall * 10 / 3);
        for tx in &feeds {
            tx.send(1).unwrap();
        }
    }
    drop(feeds);
    for eater in eaters {
        assert_eq!(eater.join().unwrap(), rounds);
    }
    assert!(told_of("fed-0").is_empty(), "{:#?}", warnings::all());
    assert!(told_of("fed-1").is_empty(), "{:#?}", warnings::all());
}

/// Fibers of two workers hand a token back and forth through fibra's
/// channels, with nothing else to wait on and a warning of a millisecond
/// (ten of them, deadlocked, are told): at every hand-over one worker is
/// quiet and the other has a wake-up on its way, or runs. Never a report.
#[test]
fn a_ping_pong_between_two_workers_is_never_told() {
    warnings::capture();
    let rt = two_workers(Duration::from_millis(1));
    let mut pairs = Vec::new();
    for pair in 0..4 {
        let (ping_tx, ping_rx) = fibra::sync::mpsc::channel::<u32>();
        let (pong_tx, pong_rx) = fibra::sync::mpsc::channel::<u32>();
        let until = std::time::Instant::now() + Duration::from_millis(1500);
        pairs.push(on_worker(rt, pair % 2, "ping", move || {
            let mut n = 0;
            while std::time::Instant::now() < until {
                ping_tx.send(n).unwrap();
                n = pong_rx.recv().unwrap() + 1;
            }
            n
        }));
        pairs.push(on_worker(rt, (pair + 1) % 2, "pong", move || {
            ping_rx.iter().map(|n| pong_tx.send(n).unwrap()).count() as u32
        }));
    }
    for handle in pairs {
        assert!(handle.join().unwrap() > 0);
    }
    assert!(told_of("\"ping\"").is_empty(), "{:#?}", warnings::all());
}
