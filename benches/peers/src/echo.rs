//! Echo round trips: fibra's server against tokio current_thread, may with
//! one worker and std thread-per-connection, all driven by the same load
//! generator; and the floor of any epoll server, a hand-written event loop
//! with no runtime at all. fibra's server comes twice: as users write it
//! (a fiber per connection reading into its own 16 KiB buffer, as tokio's
//! and may's do) and as the floor is written (`fibra-shared`: no buffer
//! while a connection waits, one per thread). Between the two floors sits
//! `coro-floor` (`coro_floor.rs`): the epoll loop with a coroutine per
//! connection and no runtime, the least a stackful design can cost.
//!
//! Each server runs in a child process (this binary, `echo-server IMPL
//! PORT`) pinned to core 0; the load generator runs here, pinned to core 1.
//! On two cores the generator saturates its own core, so beside throughput
//! and latency we report the server's CPU time (utime + stime from
//! /proc/PID/stat) per round trip, which does not depend on the generator.

use crate::wait_for_listener;
use std::io::{Read, Write};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub(crate) const RUN: Duration = Duration::from_secs(3);

pub fn pin_to(core: usize) {
    // SAFETY: a zeroed cpu_set_t with one CPU set, applied to this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

/// One echo connection in a fibra fiber.
fn fibra_echo(mut s: fibra::net::TcpStream) {
    s.set_nodelay(true).unwrap();
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 || s.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

thread_local! {
    /// The one read buffer of all the `fibra-shared` connections of a thread.
    static SHARED: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; 16 * 1024]);
}

/// One echo connection written as the floor is: it waits holding no
/// buffer (`readable`), reads into its thread's one buffer and sends the
/// bytes straight back (`try_read`, `try_write`: neither parks, so no other
/// fiber touches the buffer meanwhile). What the send buffer does not take
/// is copied out and written from the fiber's own copy, which may park.
fn fibra_echo_shared(s: fibra::net::TcpStream) {
    use std::io::ErrorKind::WouldBlock;
    s.set_nodelay(true).unwrap();
    loop {
        if s.readable().is_err() {
            return;
        }
        let rest = SHARED.with_borrow_mut(|buf| {
            loop {
                let n = match s.try_read(buf) {
                    Ok(0) => return Err(()),
                    Ok(n) => n,
                    Err(e) if e.kind() == WouldBlock => return Ok(None),
                    Err(_) => return Err(()),
                };
                let mut sent = 0;
                while sent < n {
                    match s.try_write(&buf[sent..n]) {
                        Ok(w) => sent += w,
                        Err(e) if e.kind() == WouldBlock => return Ok(Some(buf[sent..n].to_vec())),
                        Err(_) => return Err(()),
                    }
                }
                if n < buf.len() {
                    return Ok(None); // drained, as the floor stops
                }
            }
        });
        match rest {
            Ok(None) => {}
            Ok(Some(rest)) if (&s).write_all(&rest).is_ok() => {}
            _ => return,
        }
    }
}

/// Lets this thread (and the threads and processes it starts) run on every
/// core, undoing `pin_to` or an outer `taskset`.
pub fn unpin() {
    // SAFETY: as in `pin_to`, with every online CPU set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for core in 0..libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize {
            libc::CPU_SET(core, &mut set);
        }
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

/// One echo connection in a tokio task.
async fn tokio_echo(mut s: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    s.set_nodelay(true).unwrap();
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = s.read(&mut buf).await {
        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// One echo connection in a may coroutine.
fn may_echo(mut s: may::net::TcpStream) {
    s.set_nodelay(true).unwrap();
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 || s.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// `echo-server IMPL PORT`: serve until killed.
pub fn server(imp: &str, port: u16) {
    let addr = format!("127.0.0.1:{port}");
    if imp.ends_with("-2w") {
        return server_two_workers(imp, &addr);
    }
    pin_to(0);
    match imp {
        "fibra" => fibra::run(|| {
            let l = fibra::net::TcpListener::bind(addr.as_str()).unwrap();
            for s in l.incoming() {
                let s = s.unwrap();
                fibra::spawn(move || fibra_echo(s));
            }
        }),
        "fibra-shared" => fibra::run(|| {
            let l = fibra::net::TcpListener::bind(addr.as_str()).unwrap();
            for s in l.incoming() {
                let s = s.unwrap();
                fibra::spawn(move || fibra_echo_shared(s));
            }
        }),
        "tokio" => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
                .unwrap();
            rt.block_on(async {
                let l = tokio::net::TcpListener::bind(addr.as_str()).await.unwrap();
                loop {
                    let (s, _) = l.accept().await.unwrap();
                    tokio::spawn(tokio_echo(s));
                }
            })
        }
        "may" => {
            may::config().set_workers(1);
            let l = may::net::TcpListener::bind(addr.as_str()).unwrap();
            for s in l.incoming() {
                let s = s.unwrap();
                may::go!(move || may_echo(s));
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
        "epoll-floor" => crate::epoll_floor::serve(
            std::net::TcpListener::bind(addr.as_str()).unwrap(),
            crate::epoll_floor::Buffers::Shared,
        ),
        "epoll-floor-bufs" => crate::epoll_floor::serve(
            std::net::TcpListener::bind(addr.as_str()).unwrap(),
            crate::epoll_floor::Buffers::PerConnection,
        ),
        "coro-floor" => {
            crate::coro_floor::serve(std::net::TcpListener::bind(addr.as_str()).unwrap())
        }
        other => panic!("unknown server {other}"),
    }
}

/// The servers of the two-worker table: each runs two scheduler threads,
/// unpinned, as a user would.
fn server_two_workers(imp: &str, addr: &str) {
    match imp {
        // One SO_REUSEPORT listener per worker: the kernel spreads the
        // connections and none crosses threads.
        "fibra-2w" | "fibra-shared-2w" => {
            let echo = if imp == "fibra-2w" {
                fibra_echo
            } else {
                fibra_echo_shared
            };
            let rt = fibra::Runtime::builder().workers(2).build().unwrap();
            let first = fibra::net::TcpListener::bind_reuse_port(addr).unwrap();
            let mut first = Some(first);
            for w in 0..2 {
                let l = first
                    .take()
                    .unwrap_or_else(|| fibra::net::TcpListener::bind_reuse_port(addr).unwrap());
                rt.spawn_on(w, move || {
                    for s in l.incoming() {
                        let s = s.unwrap();
                        fibra::spawn(move || echo(s));
                    }
                });
            }
            loop {
                std::thread::park();
            }
        }
        // Two threads, each with its own listener and the floor's loop.
        "epoll-floor-2w" => {
            use std::os::fd::{FromRawFd, IntoRawFd};
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let l = fibra::net::TcpListener::bind_reuse_port(addr).unwrap();
                    // SAFETY: the descriptor comes straight from `into_raw_fd`.
                    let l = unsafe { std::net::TcpListener::from_raw_fd(l.into_raw_fd()) };
                    std::thread::spawn(move || {
                        crate::epoll_floor::serve(l, crate::epoll_floor::Buffers::Shared)
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
        }
        "tokio-2w" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_io()
                .build()
                .unwrap();
            rt.block_on(async {
                let l = tokio::net::TcpListener::bind(addr).await.unwrap();
                loop {
                    let (s, _) = l.accept().await.unwrap();
                    tokio::spawn(tokio_echo(s));
                }
            })
        }
        "may-2w" => {
            may::config().set_workers(2);
            let l = may::net::TcpListener::bind(addr).unwrap();
            for s in l.incoming() {
                let s = s.unwrap();
                may::go!(move || may_echo(s));
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

pub(crate) struct Load {
    round_trips: u64,
    /// Microseconds, one sample per 8 round trips.
    latencies: Vec<f64>,
}

/// One client: sends `size` bytes and reads them back until `deadline`;
/// returns its round trips and latency samples (every 8th trip, in us).
///
/// Client `i` samples the trips `n` with `n % 8 == i % 8`, so a client's
/// first trip, which waits for the server to accept the connection, is in
/// the samples for one client in 8, as often as any other trip. (Sampling
/// trip 0 of every client made the first trips 1 sample in 40 at 1 000
/// connections: the p99 measured the accept burst at the start.)
fn client(i: usize, port: u16, size: usize, deadline: Instant) -> (u64, Vec<f64>) {
    let phase = (i % 8) as u64;
    let mut s = fibra::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    let msg = vec![7u8; size];
    let mut back = vec![0u8; size];
    let (mut n, mut lat) = (0u64, Vec::new());
    while Instant::now() < deadline {
        let t = Instant::now();
        s.write_all(&msg).unwrap();
        s.read_exact(&mut back).unwrap();
        if n % 8 == phase {
            lat.push(t.elapsed().as_nanos() as f64 / 1000.0);
        }
        n += 1;
    }
    (n, lat)
}

fn total(results: impl Iterator<Item = (u64, Vec<f64>)>) -> Load {
    let mut total = Load {
        round_trips: 0,
        latencies: Vec::new(),
    };
    for (n, mut lat) in results {
        total.round_trips += n;
        total.latencies.append(&mut lat);
    }
    total
}

/// `conns` connections from fibers of one thread until RUN is over.
pub(crate) fn load(port: u16, conns: usize, size: usize) -> Load {
    fibra::run(|| {
        let deadline = Instant::now() + RUN;
        let clients: Vec<_> = (0..conns)
            .map(|i| fibra::spawn(move || client(i, port, size, deadline)))
            .collect();
        total(clients.into_iter().map(|c| c.join().unwrap()))
    })
}

/// The load generator alone (pinned to core 1): round trips in RUN.
pub fn load_only(port: u16, conns: usize, size: usize) -> u64 {
    pin_to(1);
    load(port, conns, size).round_trips
}

/// The two-worker load generator alone (unpinned): round trips in RUN,
/// p50 and p99 in us.
pub fn load_two_only(port: u16, conns: usize, size: usize) -> (u64, f64, f64) {
    let mut l = load_two_workers(port, conns, size);
    l.latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (
        l.round_trips,
        percentile(&l.latencies, 0.5),
        percentile(&l.latencies, 0.99),
    )
}

/// `conns` connections from fibra fibers on two workers until RUN is over.
pub(crate) fn load_two_workers(port: u16, conns: usize, size: usize) -> Load {
    let rt = fibra::Runtime::builder().workers(2).build().unwrap();
    let deadline = Instant::now() + RUN;
    let clients: Vec<_> = (0..conns)
        .map(|i| rt.spawn_on(i % 2, move || client(i, port, size, deadline)))
        .collect();
    total(clients.into_iter().map(|c| c.join().unwrap()))
}

pub(crate) fn start_server(imp: &str, port: u16) -> Child {
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["echo-server", imp, &port.to_string()])
        .spawn()
        .unwrap();
    wait_for_listener(imp, port);
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

/// Echo with servers of two worker threads, server and load generator
/// (fibra, two workers) unpinned on the same two cores.
pub fn run_two_workers() {
    unpin();
    let repeats = repeats(3);
    println!(
        "\nEcho round trips, servers of 2 worker threads; server and load generator (fibra, 2 workers, its own process) share both cores, unpinned; {RUN:?} per run, median of {repeats}"
    );
    table(
        &[(1, 64), (50, 64), (100, 64), (1000, 64), (1000, 4096)],
        &servers(&[
            "fibra-2w",
            "fibra-shared-2w",
            "tokio-2w",
            "may-2w",
            "epoll-floor-2w",
        ]),
        repeats,
        load_two_workers,
    );
}

pub fn run() {
    pin_to(1);
    let repeats = repeats(3);
    println!(
        "\nEcho round trips: server pinned to core 0 (its CPU time measured), load generator (fibra) on core 1, {RUN:?} per run, median of {repeats}"
    );
    table(
        &[
            (1, 64),
            (50, 64),
            (50, 4096),
            (100, 64),
            (100, 4096),
            (1000, 64),
            (1000, 4096),
        ],
        &servers(&[
            "fibra",
            "fibra-shared",
            "tokio",
            "may",
            "threads",
            "epoll-floor",
            "epoll-floor-bufs",
        ]),
        repeats,
        load,
    );
}

/// The servers to run: `ECHO_SERVERS` (comma-separated) if set, else `all`.
fn servers(all: &[&'static str]) -> Vec<&'static str> {
    match std::env::var("ECHO_SERVERS") {
        Ok(list) => all
            .iter()
            .copied()
            .filter(|s| list.split(',').any(|want| want == *s))
            .collect(),
        Err(_) => all.to_vec(),
    }
}

/// Runs per case: `ECHO_REPEATS` if set, else `default`.
pub(crate) fn repeats(default: usize) -> usize {
    std::env::var("ECHO_REPEATS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

/// One measured run: throughput, server CPU per trip (us), p50, p99 (us).
pub(crate) fn measure_once(
    imp: &str,
    conns: usize,
    size: usize,
    load: fn(u16, usize, usize) -> Load,
) -> (f64, f64, f64, f64) {
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
    (
        l.round_trips as f64 / secs,
        cpu * 1e6 / l.round_trips as f64,
        percentile(&l.latencies, 0.5),
        percentile(&l.latencies, 0.99),
    )
}

/// Each server against each case, with ratios to the first server; each
/// column is its own median over `repeats` runs.
fn table(
    cases: &[(usize, usize)],
    imps: &[&str],
    repeats: usize,
    load: fn(u16, usize, usize) -> Load,
) {
    println!(
        "  {:<26} {:>12} {:>9} {:>15} {:>9} {:>9} {:>9}",
        "", "round trips/s", "vs fibra", "server us/trip", "vs fibra", "p50 us", "p99 us"
    );
    for &(conns, size) in cases {
        println!("  -- {conns} connections, {size} B messages");
        // Round-robin over the servers, so a slow spell of the machine
        // (shared and noisy) falls on all of them alike.
        let mut runs: Vec<Vec<(f64, f64, f64, f64)>> = vec![Vec::new(); imps.len()];
        for _ in 0..repeats {
            for (i, &imp) in imps.iter().enumerate() {
                runs[i].push(measure_once(imp, conns, size, load));
            }
        }
        let mut base: Option<(f64, f64)> = None;
        for (&imp, runs) in imps.iter().zip(&runs) {
            let median_of = |field: fn(&(f64, f64, f64, f64)) -> f64| {
                let mut v: Vec<f64> = runs.iter().map(field).collect();
                v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                v[repeats / 2]
            };
            let rate = median_of(|r| r.0);
            let cpu_us = median_of(|r| r.1);
            let p50 = median_of(|r| r.2);
            let p99 = median_of(|r| r.3);
            let (base_rate, base_cpu) = *base.get_or_insert((rate, cpu_us));
            println!(
                "  {:<26} {:>12.0} {:>8.2}x {:>15.2} {:>8.2}x {:>9.1} {:>9.1}",
                imp,
                rate,
                rate / base_rate,
                cpu_us,
                cpu_us / base_cpu,
                p50,
                p99,
            );
        }
    }
}
