//! Deadlocks told (issue 48): a runtime all of whose fibers, its root
//! included, wait on fibra's own primitives with no timer armed and no fd
//! registered warns (target `fibra::deadlock`) after ten `stall_warning`s,
//! with its dump and stacks, as Go's "all goroutines are asleep". A
//! runtime with a sleeping fiber, or one waiting on a socket, never does.

mod warnings;

use std::sync::Arc;
use std::time::Duration;

const STALL: Duration = Duration::from_millis(20);

#[inline(never)]
fn lock_a_then_b(
    a: &fibra::sync::Mutex<u32>,
    b: &fibra::sync::Mutex<u32>,
    both: &fibra::sync::Barrier,
) {
    let _a = a.lock().unwrap();
    both.wait();
    let _b = b.lock().unwrap(); // waits here forever
    std::hint::black_box("lock_a_then_b");
}

#[inline(never)]
fn lock_b_then_a(
    a: &fibra::sync::Mutex<u32>,
    b: &fibra::sync::Mutex<u32>,
    both: &fibra::sync::Barrier,
) {
    let _b = b.lock().unwrap();
    both.wait();
    let _a = a.lock().unwrap(); // waits here forever
    std::hint::black_box("lock_b_then_a");
}

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
    on_a_thread(name, || {
        let a = Arc::new(fibra::sync::Mutex::new(0));
        let b = Arc::new(fibra::sync::Mutex::new(0));
        let both = Arc::new(fibra::sync::Barrier::new(2));
        let (a2, b2, both2) = (a.clone(), b.clone(), both.clone());
        let one = fibra::Builder::new()
            .name("a-then-b".into())
            .spawn(move || lock_a_then_b(&a2, &b2, &both2))
            .unwrap();
        let two = fibra::Builder::new()
            .name("b-then-a".into())
            .spawn(move || lock_b_then_a(&a, &b, &both))
            .unwrap();
        let _ = one.join();
        let _ = two.join();
    });
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
