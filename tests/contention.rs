//! `fibra::sync` and the runtime under contention, cancellation and
//! exhaustion: fibers on several workers and plain threads on the same
//! primitives, time-outs and cancels landing at any point of a wait, and
//! fds, mappings and threads running out.
//!
//! Every scenario that could hang runs bounded (a thread whose result is
//! awaited with `recv_timeout`, or a child process that is killed), so a
//! hang fails the test instead of blocking the run.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use fibra::sync::Semaphore;

/// Runs `f` on a thread of its own and waits at most `limit` for it: a
/// hang fails the test (the thread is left behind), a panic is re-raised.
fn bounded<T: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std_mpsc::channel();
    std::thread::Builder::new()
        .name(format!("bounded: {what}"))
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = tx.send(result);
        })
        .unwrap();
    match rx.recv_timeout(limit) {
        Ok(Ok(value)) => value,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("{what}: did not finish within {limit:?} (a hang)"),
    }
}

#[allow(dead_code)] // used by the exhaustion tests below
/// Whether this process is the child that runs test `name` (see [`child`]).
fn is_child(name: &str) -> bool {
    std::env::var("FIBRA_CONTENTION_CHILD").is_ok_and(|v| v == name)
}

#[allow(dead_code)]
/// Runs test `name` of this binary in a child process (which sees
/// [`is_child`]) for at most `limit`, killing it then; asserts that it
/// exited successfully and printed `CHILD OK`. A crash or an abort of the
/// child fails the test, not the whole run.
fn child(name: &str, limit: Duration) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("FIBRA_CONTENTION_CHILD", name)
        .env("RUST_BACKTRACE", "0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut process = cmd.spawn().expect("cannot run the test binary as a child");
    let start = Instant::now();
    loop {
        if process.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = process.kill();
            let out = process.wait_with_output().unwrap();
            panic!(
                "child {name} did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = process.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("CHILD OK"),
        "child {name}: status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}

// ----- 1. a failed try_acquire creates no permit -------------------------

#[test]
fn failed_try_acquire_adds_no_permit() {
    let s = Semaphore::new(0);
    for _ in 0..3 {
        assert!(s.try_acquire().is_none());
    }
    assert_eq!(s.available_permits(), 0);

    let s = Semaphore::new(1);
    let held = s.try_acquire().unwrap();
    assert!(s.try_acquire().is_none());
    assert_eq!(s.available_permits(), 0);
    drop(held);
    assert_eq!(s.available_permits(), 1);

    fibra::run(|| {
        let s = Semaphore::new(0);
        assert!(s.try_acquire().is_none());
        assert_eq!(s.available_permits(), 0);
    });
}

/// Fibers on two workers and a plain thread take a semaphore of 3 by
/// `try_acquire` (mostly failing) and by `acquire`: never more than 3
/// holders at once, and all 3 permits are back at the end.
#[test]
fn semaphore_never_over_admits_under_contention() {
    const PERMITS: usize = 3;
    const ROUNDS: usize = 2_000;
    bounded("semaphore contention", Duration::from_secs(60), || {
        let sem = Arc::new(Semaphore::new(PERMITS));
        let holders = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let work = {
            let (sem, holders, most) = (sem.clone(), holders.clone(), most.clone());
            move |fiber: bool| {
                for i in 0..ROUNDS {
                    let permit = if i % 3 == 0 {
                        Some(sem.acquire())
                    } else {
                        sem.try_acquire()
                    };
                    if let Some(permit) = permit {
                        let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        assert!(now <= PERMITS, "{now} holders of {PERMITS} permits");
                        if fiber {
                            fibra::yield_now();
                        } else {
                            std::thread::yield_now();
                        }
                        holders.fetch_sub(1, Ordering::SeqCst);
                        drop(permit);
                    } else if fiber {
                        fibra::yield_now();
                    }
                }
            }
        };
        let rt = fibra::Runtime::builder().workers(2).build().unwrap();
        let fibers: Vec<_> = (0..8)
            .map(|_| {
                let work = work.clone();
                rt.spawn(move || work(true))
            })
            .collect();
        let thread = {
            let work = work.clone();
            std::thread::spawn(move || work(false))
        };
        for f in fibers {
            f.join().unwrap();
        }
        thread.join().unwrap();
        assert!(most.load(Ordering::SeqCst) <= PERMITS);
        assert_eq!(sem.available_permits(), PERMITS, "permits created or lost");
    });
}

// ----- 8. the read guard is covariant, as std's --------------------------

/// std's `test_read_guard_covariance`, against `fibra::sync`: it compiles.
#[test]
fn read_guard_is_covariant_like_std() {
    use fibra::sync::{RwLock, RwLockReadGuard};

    fn do_stuff<'a>(_: RwLockReadGuard<'_, &'a i32>, _: &'a i32) {}
    let j: i32 = 5;
    let lock = RwLock::new(&j);
    {
        let i = 6;
        do_stuff(lock.read().unwrap(), &i);
    }
    drop(lock);
}
