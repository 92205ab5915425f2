//! Two fibers that lock two `fibra::sync::Mutex`es in opposite orders, a
//! real deadlock, for the tests of dumps (`tests/stacks.rs`) and of the
//! deadlock warning (`tests/deadlock.rs`): each function waits, for good,
//! at the line it records, which a fiber's stack must name.

use std::sync::atomic::{AtomicU32, Ordering};

/// This file, as a frame's `file:line` names it.
pub const FILE: &str = "tests/util/locks.rs";

/// The line where [`lock_a_then_b`] waits (0 until it has run).
pub static LINE_A: AtomicU32 = AtomicU32::new(0);
/// The line where [`lock_b_then_a`] waits.
pub static LINE_B: AtomicU32 = AtomicU32::new(0);

/// Locks `a`, waits at `both` for the other fiber to lock `b`, then waits
/// for `b` forever.
#[inline(never)]
pub fn lock_a_then_b(
    a: &fibra::sync::Mutex<u32>,
    b: &fibra::sync::Mutex<u32>,
    both: &fibra::sync::Barrier,
) {
    let _a = a.lock().unwrap();
    both.wait();
    LINE_A.store(line!() + 1, Ordering::Relaxed);
    let _b = b.lock().unwrap(); // waits here forever
    unreachable!();
}

/// [`lock_a_then_b`]'s other half.
#[inline(never)]
pub fn lock_b_then_a(
    a: &fibra::sync::Mutex<u32>,
    b: &fibra::sync::Mutex<u32>,
    both: &fibra::sync::Barrier,
) {
    let _b = b.lock().unwrap();
    both.wait();
    LINE_B.store(line!() + 1, Ordering::Relaxed);
    let _a = a.lock().unwrap(); // waits here forever
    unreachable!();
}

/// Spawns fibers "a-then-b" and "b-then-a" running [`lock_a_then_b`] and
/// [`lock_b_then_a`] on two fresh mutexes, and joins both: a deadlock, for
/// good, in the runtime the caller runs in.
pub fn deadlock_two_fibers() {
    use std::sync::Arc;
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
}
