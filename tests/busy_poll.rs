//! `Builder::busy_poll`: the runtime polls without sleeping for a while
//! before it waits, and still sleeps when nothing comes.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// This thread's CPU time and voluntary context switches (sleeps).
fn thread_usage() -> (Duration, i64) {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let u = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut u), 0);
        u
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (
        Duration::from_micros(us(u.ru_utime) + us(u.ru_stime)),
        u.ru_nvcsw,
    )
}

#[test]
fn a_busy_polling_runtime_still_sleeps_when_nothing_comes() {
    let rt = fibra::Runtime::builder()
        .busy_poll(Duration::from_micros(200))
        .build()
        .unwrap();
    let (cpu_before, _) = thread_usage();
    let start = Instant::now();
    rt.block_on(|| fibra::sleep(Duration::from_millis(200)));
    let slept = start.elapsed();
    let (cpu_after, _) = thread_usage();
    assert!(slept >= Duration::from_millis(200));
    let cpu = cpu_after - cpu_before;
    assert!(
        cpu < Duration::from_millis(50),
        "spun for most of a 200 ms sleep: {cpu:?} of CPU"
    );
}

#[test]
fn a_busy_polling_runtime_takes_up_quick_answers_without_sleeping() {
    const ROUNDS: usize = 2000;
    let (mut near, far) = std::os::unix::net::UnixStream::pair().unwrap();
    let echo = std::thread::spawn(move || {
        let mut far = far;
        let mut byte = [0u8];
        while far.read(&mut byte).unwrap() == 1 {
            far.write_all(&byte).unwrap();
        }
    });
    let sleeps = |busy_poll: Duration, near: &mut std::os::unix::net::UnixStream| {
        let rt = fibra::Runtime::builder()
            .busy_poll(busy_poll)
            .build()
            .unwrap();
        let stream = fibra::net::UnixStream::from(near.try_clone().unwrap());
        let (_, before) = thread_usage();
        rt.block_on(|| {
            let mut stream = &stream;
            let mut byte = [7u8];
            for _ in 0..ROUNDS {
                stream.write_all(&byte).unwrap();
                stream.read_exact(&mut byte).unwrap();
            }
        });
        let (_, after) = thread_usage();
        (after - before) as usize
    };
    // Answers take microseconds; a millisecond of polling covers nearly all
    // of them, even on a loaded machine. (Without busy polling the thread
    // sleeps about once a round, or hardly ever when the echo thread shares
    // its core and runs at once on the write: no comparison is asserted.)
    // The echo thread must get a core within the millisecond: on a
    // machine other tests load, one of three runs is asked to show it.
    let mut runs = Vec::new();
    while runs.len() < 3 && runs.iter().all(|&busy| busy >= ROUNDS / 4) {
        runs.push(sleeps(Duration::from_millis(1), &mut near));
    }
    assert!(
        runs.iter().any(|&busy| busy < ROUNDS / 4),
        "slept {runs:?} times in {ROUNDS} round trips while busy-polling"
    );
    near.shutdown(std::net::Shutdown::Both).unwrap();
    echo.join().unwrap();
}

#[test]
fn turn_busy_polls_within_its_timeout() {
    let rt = fibra::Runtime::builder()
        .busy_poll(Duration::from_secs(10))
        .build()
        .unwrap();
    let start = Instant::now();
    assert_eq!(rt.turn(Some(Duration::from_millis(20))), 0);
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(20) && took < Duration::from_secs(5),
        "turn(20 ms) took {took:?}"
    );
}

#[test]
fn busy_polling_workers_run_and_sleep_on_time() {
    let rt = fibra::Runtime::builder()
        .workers(2)
        .busy_poll(Duration::from_micros(50))
        .build()
        .unwrap();
    let handles: Vec<_> = (0..8u64)
        .map(|i| {
            rt.spawn(move || {
                fibra::sleep(Duration::from_millis(i));
                i
            })
        })
        .collect();
    let sum: u64 = rt.block_on(|| handles.into_iter().map(|h| h.join().unwrap()).sum());
    assert_eq!(sum, 28);
}

/// A stop (or any wake-up from another thread) that lands while a worker
/// spins ends the spin: the worker must not then sleep past it.
#[test]
fn busy_polling_workers_stop_when_dropped() {
    for _ in 0..200 {
        let rt = fibra::Runtime::builder()
            .workers(2)
            .busy_poll(Duration::from_millis(5))
            .build()
            .unwrap();
        rt.block_on(|| fibra::sleep(Duration::from_micros(100)));
        drop(rt); // hung before the spin reported what it had seen
    }
}
