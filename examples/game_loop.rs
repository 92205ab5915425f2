//! An outer loop (a game's, a GUI's) that owns the thread and drives a fibra
//! runtime inside a fixed 60 Hz frame: each frame updates and renders, then
//! gives fibra the time left before the next frame with
//! [`Runtime::turn_with_budget`](fibra::Runtime::turn_with_budget), sleeping
//! in `poll(2)` on the runtime's fd when fibra has nothing to do. Frames
//! start on a fixed schedule (start + n × period), whatever wakes the
//! loop in between, so the frame rate never follows the network.
//!
//! `cargo run --release --example game_loop` runs a small scene: an enemy
//! that thinks every 100 ms and a network thread's messages, as blocking
//! code in fibers.
//!
//! `cargo run --release --example game_loop -- --demo [--clients N]`
//! measures the frame period with N (200) connections each sending as
//! fast as the game's server
//! fibers answer (each answer costs 100 µs of CPU), three ways: no load,
//! load with plain `turn`, load with `turn_with_budget` (its p50, p99 and
//! max). Two runs on a 2-vCPU VM that loses about a quarter of its CPU to
//! its host (steal), game on core 0, clients on core 1:
//!
//! ```text
//! frame period, target 16.67 ms, 300 frames    p50 ms  p99 ms  max ms
//! no load, turn_with_budget                     16.71   33.21   42.33
//! 200 busy connections, turn                    37.45  199.56  375.58
//! 200 busy connections, turn_with_budget        16.68   46.47   81.12
//!
//! no load, turn_with_budget                     16.67   27.32   34.09
//! 200 busy connections, turn                    34.72   75.16  157.24
//! 200 busy connections, turn_with_budget        16.76   48.70   96.42
//! ```
//!
//! The budget keeps the frames on schedule (p50 at the period, where
//! `turn` doubles it); the tail on that host is its own (a `poll` of 14 ms
//! that returns 6–9 ms late, a 2 ms render that takes 9).
//!
//! A plain `turn` runs every fiber ready when it starts (here up to 200
//! answers of 100 µs) and the frame waits for it; a budgeted one stops
//! between fibers when the frame's time is up and leaves the rest, first
//! in line, for the next frame.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fibra::io::EventFd;

/// 60 Hz.
const FRAME: Duration = Duration::from_nanos(16_666_667);
/// What a frame's update and render cost (simulated).
const RENDER: Duration = Duration::from_millis(2);

fn main() {
    // `main` returning the error would print it with `{:?}`: say it
    // plainly instead.
    let args: Vec<String> = std::env::args().collect();
    let demo = args.iter().any(|a| a == "--demo");
    // `--clients N`: how many busy connections the demo's load has.
    let clients = args
        .iter()
        .position(|a| a == "--clients")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(200);
    let result = if demo { measure(clients) } else { scene() };
    if let Err(e) = result {
        eprintln!("game_loop: {e}");
        std::process::exit(1);
    }
}

/// Spins for `d`: stands for a frame's update and render, or a fiber's
/// work.
fn work(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Waits at most until `until` for the runtime's fd to turn readable.
fn wait_for_work(rt: &fibra::Runtime, until: Instant) {
    let left = until.saturating_duration_since(Instant::now());
    let mut pfd = libc::pollfd {
        fd: rt.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // Rounded up: a wait that ends before `until` only loops once more.
    let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut pfd, 1, ms) };
}

/// Runs `frames` frames (or until `done` says so); returns the period of
/// each (from one frame's start to the next's).
fn frame_loop(
    rt: &fibra::Runtime,
    frames: usize,
    budgeted: bool,
    done: impl Fn() -> bool,
) -> Vec<Duration> {
    let mut periods = Vec::with_capacity(frames.min(4096));
    let mut next = Instant::now();
    let mut last_start: Option<Instant> = None;
    for _ in 0..frames {
        // The frame starts on schedule (or late, if the last one overran).
        let start = Instant::now();
        if let Some(last) = last_start {
            periods.push(start - last);
        }
        last_start = Some(start);
        next += FRAME;
        if next < start {
            next = start + FRAME; // too late to catch up: a new schedule
        }
        work(RENDER); // ... update and render the frame here ...
        // Until the next frame, fibra gets the time: its ready fibers in
        // turns bounded by what is left, and a sleep on its fd otherwise.
        loop {
            let now = Instant::now();
            if now >= next {
                break;
            }
            let ran = if budgeted {
                rt.turn_with_budget(Some(Duration::ZERO), next - now)
            } else {
                rt.turn(Some(Duration::ZERO))
            };
            if ran == 0 {
                wait_for_work(rt, next);
            }
        }
        if done() {
            break;
        }
    }
    periods
}

/// The small scene: blocking game logic in fibers, 60 frames a second.
fn scene() -> std::io::Result<()> {
    let rt = fibra::Runtime::new()?;

    // Game logic written as blocking code: an enemy that thinks every 100 ms.
    rt.spawn(|| {
        for step in 1..=5 {
            fibra::sleep(Duration::from_millis(100));
            println!("  enemy: step {step}");
        }
    });

    // A "network" thread delivers messages through an eventfd; a fiber
    // handles them as they come.
    let inbox = Arc::new(EventFd::new(0)?);
    let net_inbox = inbox.clone();
    let network = std::thread::spawn(move || {
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(150));
            net_inbox.write(1).unwrap();
        }
    });
    let inbox_reader = inbox.clone();
    rt.spawn(move || {
        let mut got = 0;
        while got < 3 {
            got += inbox_reader.read().unwrap();
            println!("  network: message {got}");
        }
    });

    let start = Instant::now();
    let periods = frame_loop(&rt, usize::MAX, true, || rt.fibers() == 0);
    network.join().unwrap();
    println!(
        "{} frames in {:?} (60 Hz), runtime idle at the end",
        periods.len() + 1,
        start.elapsed()
    );
    Ok(())
}

/// `--demo`: the frame period with and without load (`clients` busy
/// connections), with and without a budget. (Also run by
/// `benches/frame_loop.rs`.)
pub fn measure(clients: usize) -> std::io::Result<()> {
    const FRAMES: usize = 300;
    println!(
        "frame period, target {:.2} ms, {FRAMES} frames    p50 ms  p99 ms  max ms",
        FRAME.as_secs_f64() * 1e3
    );
    for (name, load, budgeted) in [
        ("no load, turn_with_budget", false, true),
        ("busy connections, turn", true, false),
        ("busy connections, turn_with_budget", true, true),
    ] {
        let name = if load {
            format!("{clients} {name}")
        } else {
            name.to_string()
        };
        let periods = one_run(FRAMES, load.then_some(clients), budgeted)?;
        let mut ms: Vec<f64> = periods.iter().map(|p| p.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| ms[((ms.len() - 1) as f64 * q) as usize];
        println!(
            "{name:<44} {:>6.2}  {:>6.2}  {:>6.2}",
            at(0.5),
            at(0.99),
            ms[ms.len() - 1]
        );
    }
    Ok(())
}

/// Pins the calling thread to `cpu` (where the machine has it): the game
/// and its load generator on cores of their own, as measurements here are
/// made (see `benches/peers`).
fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET and
    // sched_setaffinity get a valid set of the size given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

/// One measured run: an echo server in the game's runtime whose answers
/// cost 100 µs each, and (with `load`) that many clients on a thread of
/// their own that keep it busy. The game runs on core 0, the clients on
/// core 1.
fn one_run(frames: usize, load: Option<usize>, budgeted: bool) -> std::io::Result<Vec<Duration>> {
    pin_to(0);
    let rt = fibra::Runtime::new()?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let listener = fibra::net::TcpListener::from(listener);
    rt.spawn(move || {
        while let Ok((mut conn, _)) = listener.accept() {
            fibra::spawn(move || {
                let mut buf = [0u8; 64];
                while conn.read_exact(&mut buf).is_ok() {
                    work(Duration::from_micros(100)); // the answer's cost
                    if conn.write_all(&buf).is_err() {
                        break;
                    }
                }
            });
        }
    });
    let stop = Arc::new(AtomicBool::new(false));
    let clients = load.map(|n| {
        let stop = stop.clone();
        std::thread::spawn(move || {
            pin_to(1);
            fibra::run(|| {
                let all: Vec<_> = (0..n)
                    .map(|_| {
                        let stop = stop.clone();
                        fibra::spawn(move || {
                            let Ok(mut s) = fibra::net::TcpStream::connect(addr) else {
                                return;
                            };
                            let mut buf = [7u8; 64];
                            while !stop.load(Ordering::Relaxed) {
                                if s.write_all(&buf).is_err() || s.read_exact(&mut buf).is_err() {
                                    return;
                                }
                            }
                        })
                    })
                    .collect();
                for c in all {
                    let _ = c.join();
                }
            })
        })
    });
    // Let the clients connect and the load settle.
    frame_loop(&rt, 30, budgeted, || false);
    let periods = frame_loop(&rt, frames, budgeted, || false);
    stop.store(true, Ordering::Relaxed);
    // The clients end once their last answer comes: keep answering.
    if let Some(clients) = clients {
        while !clients.is_finished() {
            rt.turn(Some(Duration::from_millis(10)));
        }
        clients.join().unwrap();
    }
    Ok(periods)
}
