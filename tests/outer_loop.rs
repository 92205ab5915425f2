//! Nesting a runtime in an outer event loop: `turn` and the runtime's fd.

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fibra::io::EventFd;

/// Waits up to `ms` for the runtime's fd to turn readable.
fn readable(rt: &fibra::Runtime, ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd: rt.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, ms) == 1 }
}

#[test]
fn an_outer_poll_loop_drives_timers_io_and_remote_wakeups() {
    let rt = fibra::Runtime::new().unwrap();
    let efd = Arc::new(EventFd::new(0).unwrap());
    // Wake-ups 100 ms apart, each its own turn (at 10 ms apart, a loaded
    // machine that held the thread up between two turns made one turn of
    // two wake-ups: 3 turns against the 4 this wants).
    for ms in [300u64, 100, 200] {
        rt.spawn(move || fibra::sleep(Duration::from_millis(ms)));
    }
    let e = efd.clone();
    let reader = rt.spawn(move || e.read().unwrap());
    let e = efd.clone();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        e.write(7).unwrap();
    });

    // Spawned fibers are ready: the fd says so at once.
    assert!(readable(&rt, 0));
    let start = Instant::now();
    let mut turns = 0;
    let mut resumed = 0;
    while rt.fibers() > 0 {
        assert!(
            readable(&rt, 5_000),
            "the runtime has work but its fd stayed quiet"
        );
        resumed += rt.turn(Some(Duration::ZERO));
        turns += 1;
        assert!(start.elapsed() < Duration::from_secs(30));
    }
    // 4 starts + 3 timer wake-ups + 1 eventfd wake-up.
    assert_eq!(resumed, 8);
    // (Timers 100 ms apart: a thread held up that long takes two in one
    // turn.)
    assert!(turns >= 2, "{turns} turns");
    assert!(start.elapsed() >= Duration::from_millis(300));
    writer.join().unwrap();
    assert_eq!(rt.block_on(|| reader.join().unwrap()), 7);
}

#[test]
fn the_fd_is_quiet_when_there_is_nothing_to_do() {
    let rt = fibra::Runtime::new().unwrap();
    rt.spawn(|| fibra::sleep(Duration::from_secs(3600)));
    rt.turn(Some(Duration::ZERO));
    assert!(!readable(&rt, 50), "readable with nothing due");
    // Spawning from outside wakes it.
    rt.spawn(|| ());
    assert!(readable(&rt, 1000));
    assert_eq!(rt.turn(Some(Duration::ZERO)), 1);
}

#[test]
fn turn_waits_at_most_its_timeout_and_runs_what_became_ready() {
    let rt = fibra::Runtime::new().unwrap();
    // (400 ms: a parallel test run can hold this thread up for tens of ms
    // between two turns, which made the sleep of 20 ms it had end before
    // the second.)
    rt.spawn(|| fibra::sleep(Duration::from_millis(400)));
    assert_eq!(rt.turn(Some(Duration::ZERO)), 1); // started, now asleep
    let start = Instant::now();
    assert_eq!(rt.turn(Some(Duration::from_millis(1))), 0);
    assert!(start.elapsed() < Duration::from_millis(300));
    // turn(None) waits for the timer and resumes the fiber.
    assert_eq!(rt.turn(None), 1);
    assert!(start.elapsed() >= Duration::from_millis(350));
    assert_eq!(rt.fibers(), 0);
}

#[test]
fn turn_runs_each_ready_fiber_once_per_call_under_a_yield_loop() {
    let rt = fibra::Runtime::new().unwrap();
    for _ in 0..3 {
        rt.spawn(|| {
            loop {
                fibra::yield_now()
            }
        });
    }
    for _ in 0..5 {
        assert_eq!(rt.turn(Some(Duration::ZERO)), 3);
    }
}
