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

/// Whether this process is the child that runs test `name` (see [`child`]).
fn is_child(name: &str) -> bool {
    std::env::var("FIBRA_CONTENTION_CHILD").is_ok_and(|v| v == name)
}

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

// ----- 7. a sleep to the end of time costs nothing -----------------------

/// This process's CPU time (user + system) from `/proc/self/stat`.
fn process_cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // After the command name, which may hold spaces, in parentheses.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_nanos(ticks * 1_000_000_000 / per_second)
}

/// Starts a runtime on a thread of its own whose one fiber runs `sleep`;
/// returns once it has parked.
fn park_a_sleeper(sleep: fn()) {
    let (started, ready) = std_mpsc::channel();
    std::thread::spawn(move || {
        fibra::run(|| {
            let sleeper = fibra::spawn(sleep);
            fibra::yield_now(); // it parks
            started.send(()).unwrap();
            let _ = sleeper.join();
        })
    });
    ready.recv().unwrap();
    std::thread::sleep(Duration::from_millis(50)); // settle
}

/// The CPU time this process uses over 500 ms; asserts it is under 1 %.
fn assert_idle_for_500_ms(what: &str) {
    let (cpu, start) = (process_cpu_time(), Instant::now());
    std::thread::sleep(Duration::from_millis(500));
    let (used, elapsed) = (process_cpu_time() - cpu, start.elapsed());
    assert!(
        used < elapsed / 100,
        "{what}: used {used:?} of CPU in {elapsed:?}"
    );
    println!("{what}: used {used:?} in {elapsed:?}");
}

/// A fiber sleeping `Duration::MAX` costs under 1 % of a core over 500 ms:
/// the runtime sleeps in `epoll_wait` instead of finding the timer due at
/// once; so does one sleeping until 1 ms before the end of the clock's
/// range (a deadline that does not saturate). In a child process, so that
/// other tests' CPU time does not count.
#[test]
fn sleep_duration_max_costs_no_cpu() {
    const NAME: &str = "sleep_duration_max_costs_no_cpu";
    if !is_child(NAME) {
        return child(NAME, Duration::from_secs(60));
    }
    park_a_sleeper(|| fibra::sleep(Duration::MAX));
    assert_idle_for_500_ms("sleep(Duration::MAX)");
    park_a_sleeper(|| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid out-pointer; CLOCK_MONOTONIC exists.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        let now = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
        fibra::sleep(Duration::from_nanos(u64::MAX - now - 1_000_000));
    });
    assert_idle_for_500_ms("a sleep until 1 ms before u64::MAX ns");
    println!("CHILD OK");
}
