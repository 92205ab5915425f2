//! Echo round trips: fibra's server against tokio current_thread, may with
//! one worker and std thread-per-connection, all driven by the same load
//! generator.
//!
//! Each server runs in a child process (this binary, `echo-server IMPL
//! PORT`) pinned to core 0; the load generator runs here, pinned to core 1.
//! On two cores the generator saturates its own core, so beside throughput
//! and latency we report the server's CPU time (utime + stime from
//! /proc/PID/stat) per round trip, which does not depend on the generator.

use std::io::{Read, Write};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const RUN: Duration = Duration::from_secs(3);

pub fn pin_to(core: usize) {
    // SAFETY: a zeroed cpu_set_t with one CPU set, applied to this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

/// `echo-server IMPL PORT`: serve until killed.
pub fn server(imp: &str, port: u16) {
    pin_to(0);
    let addr = format!("127.0.0.1:{port}");
    match imp {
        "fibra" => fibra::run(|| {
            let l = fibra::net::TcpListener::bind(addr.as_str()).unwrap();
            for s in l.incoming() {
                let mut s = s.unwrap();
                fibra::spawn(move || {
                    s.set_nodelay(true).unwrap();
                    let mut buf = [0u8; 16 * 1024];
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 || s.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        }),
        "tokio" => {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
                .unwrap();
            rt.block_on(async {
                let l = tokio::net::TcpListener::bind(addr.as_str()).await.unwrap();
                loop {
                    let (mut s, _) = l.accept().await.unwrap();
                    tokio::spawn(async move {
                        s.set_nodelay(true).unwrap();
                        let mut buf = [0u8; 16 * 1024];
                        while let Ok(n) = s.read(&mut buf).await {
                            if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    });
                }
            })
        }
        "may" => {
            may::config().set_workers(1);
            let l = may::net::TcpListener::bind(addr.as_str()).unwrap();
            for s in l.incoming() {
                let mut s = s.unwrap();
                may::go!(move || {
                    s.set_nodelay(true).unwrap();
                    let mut buf = [0u8; 16 * 1024];
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 || s.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        }
        "threads" => {
            let l = std::net::TcpListener::bind(addr.as_str()).unwrap();
            for s in l.incoming() {
                let mut s = s.unwrap();
                std::thread::Builder::new()
                    .stack_size(64 * 1024)
                    .spawn(move || {
                        s.set_nodelay(true).unwrap();
                        let mut buf = [0u8; 16 * 1024];
                        while let Ok(n) = s.read(&mut buf) {
                            if n == 0 || s.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    })
                    .unwrap();
            }
        }
        other => panic!("unknown server {other}"),
    }
}

/// The server's CPU time so far (utime + stime), in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the ")" that ends the command name; utime and stime are
    // fields 14 and 15 of the whole line.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

struct Load {
    round_trips: u64,
    /// Microseconds, one sample per round trip (every 8th).
    latencies: Vec<f64>,
}

/// `conns` connections, each sending `size` bytes and reading them back
/// until RUN is over.
fn load(port: u16, conns: usize, size: usize) -> Load {
    fibra::run(|| {
        let deadline = Instant::now() + RUN;
        let clients: Vec<_> = (0..conns)
            .map(|_| {
                fibra::spawn(move || {
                    let mut s = fibra::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                    s.set_nodelay(true).unwrap();
                    let msg = vec![7u8; size];
                    let mut back = vec![0u8; size];
                    let (mut n, mut lat) = (0u64, Vec::new());
                    while Instant::now() < deadline {
                        let t = Instant::now();
                        s.write_all(&msg).unwrap();
                        s.read_exact(&mut back).unwrap();
                        if n % 8 == 0 {
                            lat.push(t.elapsed().as_nanos() as f64 / 1000.0);
                        }
                        n += 1;
                    }
                    (n, lat)
                })
            })
            .collect();
        let mut total = Load {
            round_trips: 0,
            latencies: Vec::new(),
        };
        for c in clients {
            let (n, mut lat) = c.join().unwrap();
            total.round_trips += n;
            total.latencies.append(&mut lat);
        }
        total
    })
}

fn start_server(imp: &str, port: u16) -> Child {
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["echo-server", imp, &port.to_string()])
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{imp} server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p) as usize]
}

pub fn run() {
    pin_to(1);
    println!(
        "\nEcho round trips: server pinned to core 0 (its CPU time measured), load generator (fibra) on core 1, {RUN:?} per run"
    );
    println!(
        "  {:<26} {:>12} {:>9} {:>15} {:>9} {:>9} {:>9}",
        "", "round trips/s", "vs fibra", "server us/trip", "vs fibra", "p50 us", "p99 us"
    );
    for (conns, size) in [(100, 64), (100, 4096), (1000, 64), (1000, 4096)] {
        println!("  -- {conns} connections, {size} B messages");
        let mut base: Option<(f64, f64)> = None;
        for imp in ["fibra", "tokio", "may", "threads"] {
            let port = free_port();
            let mut server = start_server(imp, port);
            let cpu_before = cpu_seconds(server.id());
            let t = Instant::now();
            let mut l = load(port, conns, size);
            let secs = t.elapsed().as_secs_f64();
            let cpu = cpu_seconds(server.id()) - cpu_before;
            server.kill().unwrap();
            server.wait().unwrap();
            l.latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let rate = l.round_trips as f64 / secs;
            let cpu_us = cpu * 1e6 / l.round_trips as f64;
            let (base_rate, base_cpu) = *base.get_or_insert((rate, cpu_us));
            println!(
                "  {:<26} {:>12.0} {:>8.2}x {:>15.2} {:>8.2}x {:>9.1} {:>9.1}",
                imp,
                rate,
                rate / base_rate,
                cpu_us,
                cpu_us / base_cpu,
                percentile(&l.latencies, 0.5),
                percentile(&l.latencies, 0.99),
            );
        }
    }
}
