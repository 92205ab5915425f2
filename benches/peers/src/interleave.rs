//! Echo server CPU per round trip, several servers interleaved in short
//! windows under one load generator: `echo-il`.
//!
//! `cpu_ab.sh` drives one server for 3 s, then the next. On a host whose
//! speed drifts from second to second (a virtual CPU woken late, a
//! neighbour's load), two such runs differ by 20–40 % whatever the servers
//! are, and a ratio of two runs mostly measures the drift. Here every
//! server keeps its connections open for the whole run, and the load
//! moves from one server to the next every window (50 ms, say): a
//! server's CPU time is read before and after each of its windows (the sum
//! of `/proc/PID/task/*/schedstat`, in nanoseconds, so no clock-tick
//! sampling), and each round (one window per server, the order turning
//! round by round) gives a ratio of servers that ran a fraction of a
//! second apart. The medians of those per-round ratios are what to
//! quote; the spread shows how well the drift was cancelled.
//!
//! `echo-il WINDOW_MS ROUNDS CONNS SIZE NAME=PID:PORT...` (started by
//! `cpu_il.sh`, which also starts and pins the servers; with
//! `IL_WORKERS=2`, a load generator of two workers, unpinned).

use std::io::{Read, Write};
use std::time::{Duration, Instant};

struct Server {
    pid: u32,
    conns: Vec<fibra::net::TcpStream>,
    got: Measured,
}

/// What [`interleave`] measured of one server.
#[derive(Default)]
pub struct Measured {
    /// Nanoseconds of CPU per round trip, one a round.
    pub per_trip: Vec<f64>,
    /// The 99th percentile of the round trips' latency (µs), one a round.
    pub p99: Vec<f64>,
    /// Every eighth round trip's latency (µs) over all rounds.
    pub latencies: Vec<f64>,
}

/// The CPU time of every thread of `pid`, in nanoseconds.
fn cpu_ns(pid: u32) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path().join("schedstat");
        // A thread may end between the listing and the read.
        if let Ok(s) = std::fs::read_to_string(path) {
            total += s.split(' ').next().unwrap().parse::<u64>().unwrap();
        }
    }
    total
}

/// One window of load on `conns`: every connection makes round trips until
/// `deadline`, connection `i` in a fiber on worker `i % workers`. Returns
/// the round trips made and every eighth one's latency (µs).
fn window(
    rt: &fibra::Runtime<fibra::runtime::Workers>,
    conns: &mut Vec<fibra::net::TcpStream>,
    size: usize,
    deadline: Instant,
) -> (u64, Vec<f64>) {
    let workers = rt.workers();
    let fibers: Vec<_> = conns
        .drain(..)
        .enumerate()
        .map(|(i, mut s)| {
            rt.spawn_on(i % workers, move || {
                let msg = vec![7u8; size];
                let mut back = vec![0u8; size];
                let (mut n, mut lat) = (0u64, Vec::new());
                let phase = (i % 8) as u64;
                loop {
                    let t = Instant::now();
                    if t >= deadline {
                        break;
                    }
                    s.write_all(&msg).unwrap();
                    s.read_exact(&mut back).unwrap();
                    if n % 8 == phase {
                        lat.push(t.elapsed().as_nanos() as f64 / 1e3);
                    }
                    n += 1;
                }
                (s, n, lat)
            })
        })
        .collect();
    let (mut trips, mut latencies) = (0, Vec::new());
    for f in fibers {
        let (s, n, mut lat) = f.join().unwrap();
        conns.push(s);
        trips += n;
        latencies.append(&mut lat);
    }
    (trips, latencies)
}

/// The `p` quantile of `v` (sorted here).
pub fn quantile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len().max(1) - 1) as f64 * p) as usize]
}

/// The load of an interleaved run: `conns` connections of `size`-byte
/// round trips to each server, moved from one server to the next every
/// `window`, for `rounds` rounds, from fibers on `workers` workers (pinned
/// or not as the caller's thread is).
#[derive(Clone, Copy)]
pub struct Plan {
    pub conns: usize,
    pub size: usize,
    pub window: Duration,
    pub rounds: usize,
    pub workers: usize,
}

/// Runs `plan` on each server (`(pid, port)`); returns what it measured of
/// each.
pub fn interleave(servers: &[(u32, u16)], plan: &Plan) -> Vec<Measured> {
    let Plan {
        conns,
        size,
        window: window_len,
        rounds,
        workers,
    } = *plan;
    let rt = fibra::Runtime::builder().workers(workers).build().unwrap();
    let mut all: Vec<Server> = servers
        .iter()
        .map(|(pid, port)| Server {
            pid: *pid,
            conns: (0..conns)
                .map(|_| {
                    let s = fibra::net::TcpStream::connect(("127.0.0.1", *port)).unwrap();
                    s.set_nodelay(true).unwrap();
                    s
                })
                .collect(),
            got: Measured::default(),
        })
        .collect();
    // A first window each, not counted: every server has made its
    // connections' fibers and buffers and run each once.
    for s in &mut all {
        window(&rt, &mut s.conns, size, Instant::now() + window_len);
    }
    let n = all.len();
    for round in 0..rounds {
        for i in 0..n {
            let s = &mut all[(round + i) % n];
            let before = cpu_ns(s.pid);
            let (trips, mut lat) = window(&rt, &mut s.conns, size, Instant::now() + window_len);
            let used = cpu_ns(s.pid) - before;
            s.got.per_trip.push(used as f64 / trips.max(1) as f64);
            if !lat.is_empty() {
                s.got.p99.push(quantile(&mut lat, 0.99));
                s.got.latencies.append(&mut lat);
            }
        }
    }
    all.into_iter().map(|s| s.got).collect()
}

/// [`interleave`] of server kinds this process starts (each pins itself
/// as `echo-server` does), killed after.
pub fn interleave_kinds(imps: &[&str], plan: &Plan) -> Vec<Measured> {
    let mut children = Vec::new();
    let servers: Vec<_> = imps
        .iter()
        .map(|imp| {
            let port = crate::echo::free_port();
            let child = crate::echo::start_server(imp, port);
            let spec = (child.id(), port);
            children.push(child);
            spec
        })
        .collect();
    let v = interleave(&servers, plan);
    for mut c in children {
        c.kill().unwrap();
        c.wait().unwrap();
    }
    v
}

pub fn run(args: &[String]) {
    let [window_ms, rounds, conns, size, servers @ ..] = args else {
        eprintln!("usage: echo-il WINDOW_MS ROUNDS CONNS SIZE NAME=PID:PORT...");
        std::process::exit(2);
    };
    let (names, servers): (Vec<String>, Vec<(u32, u16)>) = servers
        .iter()
        .map(|spec| {
            let (name, at) = spec.split_once('=').expect("NAME=PID:PORT");
            let (pid, port) = at.split_once(':').expect("NAME=PID:PORT");
            (
                name.to_string(),
                (pid.parse().unwrap(), port.parse().unwrap()),
            )
        })
        .unzip();
    // IL_WORKERS=2: a load generator of two workers, unpinned, for servers
    // of two workers (as `cpu_ab2.sh`); else one, pinned to core 1.
    let workers: usize = std::env::var("IL_WORKERS").map_or(1, |w| w.parse().unwrap());
    if workers == 1 {
        crate::echo::pin_to(1);
    }
    let plan = Plan {
        conns: conns.parse().unwrap(),
        size: size.parse().unwrap(),
        window: Duration::from_millis(window_ms.parse().unwrap()),
        rounds: rounds.parse().unwrap(),
        workers,
    };
    let per_trip = interleave(&servers, &plan);
    let per_trip: Vec<Vec<f64>> = per_trip.into_iter().map(|m| m.per_trip).collect();
    report(&names, &per_trip);
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// Each server's median CPU a trip (ns in, µs out) and the median of its
/// per-round ratios to each other server.
fn report(names: &[String], per_trip: &[Vec<f64>]) {
    println!(
        "server CPU per round trip, median of the rounds (min–max), and its per-round ratio to the others:"
    );
    for (i, (name, mine)) in names.iter().zip(per_trip).enumerate() {
        let (m, lo, hi) = median(mine.clone());
        print!(
            "{name:<14} {:>6.2} us ({:.2}–{:.2})",
            m / 1e3,
            lo / 1e3,
            hi / 1e3
        );
        for (j, (other, theirs)) in names.iter().zip(per_trip).enumerate() {
            if i != j {
                let ratios = mine.iter().zip(theirs).map(|(a, b)| a / b).collect();
                let (m, lo, hi) = median(ratios);
                print!("  /{other} {m:.3} ({lo:.3}–{hi:.3})");
            }
        }
        println!();
    }
}
