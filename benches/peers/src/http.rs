//! HTTP "hello" under `wrk`: fibra's `http_hello` example against a tokio
//! current_thread server running the same HTTP session code
//! (`examples/http_hello/http1.rs`) and may_minihttp (one worker).
//! Servers run pinned to core 0 (their CPU time measured), wrk on core 1.
//! Needs `wrk` (Debian package `wrk`).

use crate::wait_for_listener;
use std::process::{Child, Command};

use crate::echo::{cpu_seconds, free_port, pin_to};

const BODY: &str = "Hello, world!";

/// `http-server IMPL PORT` (tokio and may; fibra runs its example binary).
pub fn server(imp: &str, port: u16) {
    pin_to(0);
    let addr = format!("127.0.0.1:{port}");
    match imp {
        "tokio" => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let l = tokio::net::TcpListener::bind(addr.as_str()).await.unwrap();
                loop {
                    let (s, _) = l.accept().await.unwrap();
                    tokio::spawn(async move {
                        s.set_nodelay(true).unwrap();
                        tokio_serve(s).await;
                    });
                }
            })
        }
        "may" => {
            may::config().set_workers(1);
            #[derive(Clone)]
            struct Hello;
            impl may_minihttp::HttpService for Hello {
                fn call(
                    &mut self,
                    _req: may_minihttp::Request,
                    rsp: &mut may_minihttp::Response,
                ) -> std::io::Result<()> {
                    rsp.body(BODY);
                    Ok(())
                }
            }
            let server = may_minihttp::HttpServer(Hello)
                .start(addr.as_str())
                .unwrap();
            server.join().unwrap();
        }
        other => panic!("unknown server {other}"),
    }
}

/// fibra's connection loop (`http_hello/http1.rs`, the same session:
/// framing, limits, Date, answers) written for tokio, with the same idle
/// timeout on every read, so that the tables compare runtimes, not HTTP
/// servers.
pub async fn tokio_serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut s: S) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config = crate::http1::Config::default();
    let mut session = crate::http1::Session::new(config);
    let mut buf = vec![0u8; session.buffer_size()];
    let (mut filled, mut out) = (0, Vec::with_capacity(4096));
    loop {
        let n = match tokio::time::timeout(config.idle_timeout, s.read(&mut buf[filled..])).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return,
            Ok(Ok(n)) => n,
        };
        filled += n;
        let (used, keep_going) = session.feed(&buf[..filled], &mut out);
        if !out.is_empty() {
            if s.write_all(&out).await.is_err() || s.flush().await.is_err() {
                return;
            }
            out.clear();
        }
        if !keep_going {
            let _ = s.shutdown().await;
            return;
        }
        buf.copy_within(used..filled, 0);
        filled -= used;
    }
}

pub fn start(imp: &str, port: u16) -> Child {
    let child = if imp == "fibra" {
        let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/release/examples/http_hello");
        assert!(
            example.exists(),
            "build it first: cargo build --release --example http_hello (in the repo root)"
        );
        Command::new("taskset")
            .args(["-c", "0"])
            .arg(example)
            .arg(format!("127.0.0.1:{port}"))
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    } else {
        Command::new(std::env::current_exe().unwrap())
            .args(["http-server", imp, &port.to_string()])
            .spawn()
            .unwrap()
    };
    wait_for_listener(imp, port);
    child
}

/// (requests/s, p50 ms, p99 ms) from wrk's output.
pub(crate) fn parse_wrk(out: &str) -> (f64, f64, f64) {
    let num = |line: &str| -> f64 {
        let v = line.split_whitespace().last().unwrap();
        let (n, unit) = v.split_at(v.find(|c: char| c.is_alphabetic()).unwrap_or(v.len()));
        let n: f64 = n.parse().unwrap_or(0.0);
        match unit {
            "us" => n / 1000.0,
            "s" => n * 1000.0,
            _ => n,
        }
    };
    let rps = out
        .lines()
        .find(|l| l.starts_with("Requests/sec:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let p = |pct: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(pct))
            .map_or(0.0, num)
    };
    (rps, p("50%"), p("99%"))
}

pub fn run() {
    let repeats = std::env::var("HTTP_REPEATS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(3);
    println!(
        "\nHTTP hello under wrk (-t1 -c100 -d5s --latency, pinned to core 1); servers pinned to core 0; median of {repeats}, servers in turn"
    );
    println!(
        "  {:<26} {:>12} {:>9} {:>15} {:>9} {:>9} {:>9}",
        "", "requests/s", "vs fibra", "server us/req", "vs fibra", "p50 ms", "p99 ms"
    );
    let imps = ["fibra", "tokio", "may"];
    // Round-robin, as in the echo tables: a slow spell of the shared
    // machine falls on every server alike.
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
        println!(
            "  {:<26} {:>12.0} {:>8.2}x {:>15.2} {:>8.2}x {:>9.2} {:>9.2}",
            imp,
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
        .args(["-c", "1", "wrk", "-t1", "-c100", "-d5s", "--latency"])
        .arg(format!("http://127.0.0.1:{port}/"))
        .output()
        .expect("wrk is needed: apt-get install wrk");
    let cpu = cpu_seconds(server.id()) - before;
    server.kill().unwrap();
    server.wait().unwrap();
    let (rps, p50, p99) = parse_wrk(&String::from_utf8_lossy(&out.stdout));
    [rps, cpu * 1e6 / (rps * 5.0), p50, p99]
}
