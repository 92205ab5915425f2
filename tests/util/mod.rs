//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod locks;
pub mod postgres;

use std::cell::Cell;
use std::process::{Command, Output};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Counts how many of its clones have been dropped (single-threaded).
#[derive(Clone, Default)]
pub struct DropCount(Rc<Cell<usize>>);

impl DropCount {
    pub fn guard(&self) -> DropGuard {
        DropGuard(self.0.clone())
    }
    pub fn get(&self) -> usize {
        self.0.get()
    }
}

pub struct DropGuard(Rc<Cell<usize>>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

/// Counts drops across threads.
#[derive(Clone, Default)]
pub struct SyncDropCount(Arc<AtomicUsize>);

impl SyncDropCount {
    pub fn guard(&self) -> SyncDropGuard {
        SyncDropGuard(self.0.clone())
    }
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

pub struct SyncDropGuard(Arc<AtomicUsize>);

impl Drop for SyncDropGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs the test `name` of this test binary again in a child process with
/// `FIBRA_CHILD=name` set, and returns its output. The test checks the
/// variable to act as the child.
pub fn run_child(name: &str) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("FIBRA_CHILD", name)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("cannot run the test binary as a child")
}

/// Runs test `name` of this binary as a child whose stderr is read until
/// `done` says it holds what the test waits for (or the child ends, or
/// `within` passes); kills the child and returns its stderr. For a child
/// that waits for good once it has said it (a dump on SIGQUIT, say).
pub fn child_stderr_until(name: &str, within: Duration, done: fn(&str) -> bool) -> String {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("FIBRA_CHILD", name)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("cannot run the test binary as a child");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let mut buf = [0; 4096];
        while let Ok(n @ 1..) = std::io::Read::read(&mut stderr, &mut buf) {
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
            if done(&text) {
                break;
            }
        }
        text
    });
    let start = std::time::Instant::now();
    while !reader.is_finished() && start.elapsed() < within {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap()
}

/// Whether this process is the child for test `name`.
pub fn is_child(name: &str) -> bool {
    std::env::var("FIBRA_CHILD").is_ok_and(|v| v == name)
}

/// The panic message of a payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic>".to_string()
    }
}

/// Runs test `name` as a child (see [`run_child`]) and asserts that it
/// succeeded and printed `CHILD OK`.
pub fn assert_child_ok(name: &str) {
    let out = run_child(name);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("CHILD OK"),
        "status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}

/// Runs `n` fibers of `one` on one thread (a fresh `fibra::run`) beside a
/// ticker fiber that sleeps 5 ms at a time; returns how long the `n`
/// fibers took together and the ticker's longest gap between two ticks —
/// above a few milliseconds, something blocked the thread.
pub fn side_by_side(
    n: usize,
    one: impl Fn(usize) + Clone + 'static,
) -> (std::time::Duration, std::time::Duration) {
    use std::time::{Duration, Instant};
    fibra::run(move || {
        let stop = Rc::new(Cell::new(false));
        let ticker = {
            let stop = stop.clone();
            fibra::spawn(move || {
                let (mut worst, mut last) = (Duration::ZERO, Instant::now());
                while !stop.get() {
                    fibra::sleep(Duration::from_millis(5));
                    worst = worst.max(last.elapsed());
                    last = Instant::now();
                }
                worst
            })
        };
        let start = Instant::now();
        let fibers: Vec<_> = (0..n)
            .map(|i| {
                let one = one.clone();
                fibra::spawn(move || one(i))
            })
            .collect();
        for f in fibers {
            f.join().unwrap();
        }
        let took = start.elapsed();
        stop.set(true);
        (took, ticker.join().unwrap())
    })
}

/// Runs `f` on its own thread and fails (instead of hanging) if it takes
/// longer than `limit`.
pub fn bounded<T: Send + 'static>(
    limit: std::time::Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    use std::sync::mpsc;
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => {
            t.join().unwrap();
            v
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match t.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!(),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the test did not end within {limit:?}"),
    }
}

/// [`side_by_side`] of `n` fibers that each wait about `wait` in the call
/// under test, and the check that they were parked, not the thread
/// blocked: together less than half the `n` waits they would take one
/// after another, and the ticker never held up for a quarter of them
/// (under AddressSanitizer, where the fibers' work between parks is
/// several times slower, half).
///
/// Had the calls blocked the thread, the `n` fibers, started together,
/// would wait one after another in one turn: `n` waits in all and in the
/// ticker's gap. The bounds are fractions of that, not one wait: a shared
/// 2-core VM freezes for up to a second at times (steal time; with other
/// builds beside it, two tests here read ticker gaps of 435 ms and 1.0 s
/// and 20 fibers of 300 ms took 1.3 s, though they parked).
pub fn assert_parked(
    what: &str,
    n: usize,
    wait: std::time::Duration,
    one: impl Fn(usize) + Clone + 'static,
) {
    let (took, gap) = side_by_side(n, one);
    println!("{what}: {n} fibers {took:?}, longest ticker gap {gap:?}");
    let n = n as u32;
    assert!(
        took < wait * n / 2,
        "{what}: {n} waits of {wait:?} took {took:?}"
    );
    let quarter = if cfg!(fibra_asan) { 2 } else { 4 };
    assert!(
        gap < wait * n / quarter,
        "{what}: the ticker stalled {gap:?}"
    );
}
