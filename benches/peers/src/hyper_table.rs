//! hyper 1 "Hello, world!" under `wrk -c 50`: on fibra (the repo's
//! `hyper_hello` example: a fiber per connection, `block_on_future`, the
//! `futures-io` feature) and on tokio current_thread (hyper-util's
//! `TokioIo`, a task per connection). Same hyper, same service, same
//! response. Servers pinned to core 0 (their CPU time measured from
//! /proc), wrk to core 1; servers in turn, median of 3 (`HYPER_REPEATS`).
//! The target: fibra's server CPU per request at most 1.05× tokio's.

use crate::wait_for_listener;
use std::convert::Infallible;
use std::process::{Child, Command};

use crate::echo::{cpu_seconds, free_port, pin_to};
use crate::http::parse_wrk;

/// `hyper-server tokio PORT` (fibra runs its example binary).
pub fn server(imp: &str, port: u16) {
    assert_eq!(imp, "tokio", "unknown hyper server {imp}");
    pin_to(0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        loop {
            let (s, _) = l.accept().await.unwrap();
            tokio::spawn(async move {
                s.set_nodelay(true).unwrap();
                let service = hyper::service::service_fn(|_req| async {
                    Ok::<_, Infallible>(hyper::Response::new(http_body_util::Full::new(
                        bytes::Bytes::from_static(b"Hello, world!"),
                    )))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(s), service)
                    .await;
            });
        }
    })
}

fn start(imp: &str, port: u16) -> Child {
    let child = if imp == "fibra" {
        let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/release/examples/hyper_hello");
        assert!(
            example.exists(),
            "build it first: cargo build --release --features futures-io --example hyper_hello (in the repo root)"
        );
        Command::new("taskset")
            .args(["-c", "0"])
            .arg(example)
            .arg(format!("127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    } else {
        Command::new(std::env::current_exe().unwrap())
            .args(["hyper-server", imp, &port.to_string()])
            .spawn()
            .unwrap()
    };
    wait_for_listener(imp, port);
    child
}

pub fn run() {
    let repeats = std::env::var("HYPER_REPEATS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(3);
    println!(
        "\nhyper 1 hello under wrk (-t1 -c50 -d5s --latency, pinned to core 1); servers pinned to core 0; median of {repeats}, servers in turn"
    );
    println!(
        "  {:<26} {:>12} {:>9} {:>15} {:>9} {:>9} {:>9}",
        "", "requests/s", "vs fibra", "server us/req", "vs fibra", "p50 ms", "p99 ms"
    );
    let imps = ["fibra", "tokio"];
    let mut runs: Vec<Vec<[f64; 4]>> = vec![Vec::new(); imps.len()];
    for _ in 0..repeats {
        for (i, imp) in imps.iter().enumerate() {
            runs[i].push(measure_once(imp));
        }
    }
    let mut base: Option<(f64, f64)> = None;
    for (imp, runs) in imps.iter().zip(&runs) {
        let median = |field: usize| {
            let mut v: Vec<f64> = runs.iter().map(|r| r[field]).collect();
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v[repeats / 2]
        };
        let (rps, per_req, p50, p99) = (median(0), median(1), median(2), median(3));
        let (brps, bcpu) = *base.get_or_insert((rps, per_req));
        let name = match *imp {
            "fibra" => "hyper on fibra",
            _ => "hyper on tokio (cur_thread)",
        };
        println!(
            "  {:<26} {:>12.0} {:>8.2}x {:>15.2} {:>8.2}x {:>9.2} {:>9.2}",
            name,
            rps,
            rps / brps,
            per_req,
            per_req / bcpu,
            p50,
            p99
        );
    }
}

/// One wrk run against a fresh server: requests/s, server us per request,
/// p50 and p99 (ms).
fn measure_once(imp: &str) -> [f64; 4] {
    let port = free_port();
    let mut server = start(imp, port);
    let before = cpu_seconds(server.id());
    let out = Command::new("taskset")
        .args(["-c", "1", "wrk", "-t1", "-c50", "-d5s", "--latency"])
        .arg(format!("http://127.0.0.1:{port}/"))
        .output()
        .expect("wrk is needed: apt-get install wrk");
    let cpu = cpu_seconds(server.id()) - before;
    server.kill().unwrap();
    server.wait().unwrap();
    let (rps, p50, p99) = parse_wrk(&String::from_utf8_lossy(&out.stdout));
    [rps, cpu * 1e6 / (rps * 5.0), p50, p99]
}
