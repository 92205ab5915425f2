//! `hook`: one echo load generator written three ways, against the same
//! fibra echo server (a child process pinned to core 0): fibra's own
//! sockets in fibers, plain `std::net::TcpStream` code in fibers (parked by
//! fibra's `hook` feature), and the same std code on one OS thread per
//! connection. The client runs here, pinned to core 1; beside round trips
//! per second we report the client's CPU time per round trip
//! (utime + stime of this process).

use std::io::{Read, Write};
use std::time::Instant;

use crate::echo::{RUN, cpu_seconds, free_port, pin_to, repeats, start_server};

/// One connection's loop, for any stream: `size`-byte messages until
/// `deadline`; returns its round trips.
fn trips<S: Read + Write>(mut s: S, size: usize, deadline: Instant) -> u64 {
    let msg = vec![7u8; size];
    let mut back = vec![0u8; size];
    let mut n = 0u64;
    while Instant::now() < deadline {
        s.write_all(&msg).unwrap();
        s.read_exact(&mut back).unwrap();
        n += 1;
    }
    n
}

fn fibra_sockets(port: u16, conns: usize, size: usize) -> u64 {
    fibra::run(|| {
        let deadline = Instant::now() + RUN;
        let clients: Vec<_> = (0..conns)
            .map(|_| {
                fibra::spawn(move || {
                    let s = fibra::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                    s.set_nodelay(true).unwrap();
                    trips(s, size, deadline)
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().unwrap()).sum()
    })
}

fn std_in_fibers(port: u16, conns: usize, size: usize) -> u64 {
    fibra::run(|| {
        let deadline = Instant::now() + RUN;
        let clients: Vec<_> = (0..conns)
            .map(|_| {
                fibra::spawn(move || {
                    let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                    s.set_nodelay(true).unwrap();
                    trips(s, size, deadline)
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().unwrap()).sum()
    })
}

fn std_on_threads(port: u16, conns: usize, size: usize) -> u64 {
    let deadline = Instant::now() + RUN;
    let clients: Vec<_> = (0..conns)
        .map(|_| {
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                    s.set_nodelay(true).unwrap();
                    trips(s, size, deadline)
                })
                .unwrap()
        })
        .collect();
    clients.into_iter().map(|c| c.join().unwrap()).sum()
}

/// One run: round trips per second and client CPU microseconds per trip.
fn measure_once(client: fn(u16, usize, usize) -> u64, conns: usize, size: usize) -> (f64, f64) {
    let port = free_port();
    let mut server = start_server("fibra", port);
    let me = std::process::id();
    let cpu_before = cpu_seconds(me);
    let t = Instant::now();
    let n = client(port, conns, size);
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds(me) - cpu_before;
    server.kill().unwrap();
    server.wait().unwrap();
    (n as f64 / secs, cpu * 1e6 / n as f64)
}

pub fn run() {
    pin_to(1);
    let repeats = repeats(3);
    println!(
        "\nEcho client written three ways against fibra's echo server (core 0); client on core 1, its CPU time measured; {RUN:?} per run, median of {repeats}"
    );
    println!(
        "  {:<30} {:>13} {:>9} {:>15} {:>9}",
        "", "round trips/s", "vs fibra", "client us/trip", "vs fibra"
    );
    let clients: [(&str, fn(u16, usize, usize) -> u64); 3] = [
        ("fibra sockets, fibers", fibra_sockets),
        ("std sockets + hook, fibers", std_in_fibers),
        ("std sockets, OS threads", std_on_threads),
    ];
    for (conns, size) in [(1000, 64), (1000, 4096), (100, 64)] {
        println!("  -- {conns} connections, {size} B messages");
        let mut runs = vec![Vec::new(); clients.len()];
        for _ in 0..repeats {
            for (i, (_, client)) in clients.iter().enumerate() {
                runs[i].push(measure_once(*client, conns, size));
            }
        }
        let median = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| {
            let mut v: Vec<f64> = v.iter().map(f).collect();
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v[v.len() / 2]
        };
        let base = (median(&runs[0], |r| r.0), median(&runs[0], |r| r.1));
        for ((name, _), runs) in clients.iter().zip(&runs) {
            let (rate, cpu) = (median(runs, |r| r.0), median(runs, |r| r.1));
            println!(
                "  {:<30} {:>13.0} {:>8.2}x {:>15.2} {:>8.2}x",
                name,
                rate,
                rate / base.0,
                cpu,
                cpu / base.1
            );
        }
    }
}
