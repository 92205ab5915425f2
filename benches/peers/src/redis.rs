//! Redis under `redis-benchmark`: fibra's `mini_redis` example against
//! `redis-server` itself (no persistence, one I/O thread). Each server runs
//! pinned to core 0 (its CPU time measured from /proc), the benchmark on
//! core 1. Needs the Debian packages `redis-server` and `redis-tools`, and
//! the example built: `cargo build --release --example mini_redis`.

use crate::wait_for_listener;
use std::collections::HashMap;
use std::process::{Child, Command, Stdio};

use crate::echo::{cpu_seconds, free_port};

/// The commands measured (PING gives PING_INLINE and PING_MBULK).
const TESTS: &[&str] = &["ping", "set", "get", "lpush", "lpop"];
/// The (clients, pipeline) configurations.
const CONFIGS: &[(usize, usize)] = &[(50, 1), (50, 16), (1000, 1)];
const SERVERS: &[&str] = &["mini_redis", "redis-server"];

struct Server {
    child: Child,
    dir: Option<std::path::PathBuf>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn start(imp: &str, port: u16) -> Server {
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0"]);
    let mut dir = None;
    if imp == "mini_redis" {
        let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/release/examples/mini_redis");
        assert!(
            example.exists(),
            "build it first: cargo build --release --example mini_redis (in the repo root)"
        );
        cmd.arg(example).arg(format!("127.0.0.1:{port}"));
    } else {
        let d = std::env::temp_dir().join(format!("fibra-peers-redis-{port}"));
        std::fs::create_dir_all(&d).unwrap();
        cmd.args([
            "redis-server",
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args(["--save", "", "--appendonly", "no", "--io-threads", "1"])
        .arg("--dir")
        .arg(&d);
        dir = Some(d);
    }
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {imp}: {e} (apt-get install redis-server)"));
    let server = Server { child, dir };
    wait_for_listener(imp, port);
    server
}

/// One redis-benchmark run of one command: (test name, requests/s) per
/// line of its CSV output, and the server's CPU seconds over the run.
fn bench_once(
    pid: u32,
    port: u16,
    test: &str,
    clients: usize,
    pipeline: usize,
    n: usize,
) -> (Vec<(String, f64)>, f64) {
    let before = cpu_seconds(pid);
    let out = Command::new("taskset")
        .args(["-c", "1", "redis-benchmark", "-p", &port.to_string()])
        .args(["-c", &clients.to_string(), "-P", &pipeline.to_string()])
        .args(["-n", &n.to_string(), "-t", test, "--csv"])
        .output()
        .expect("redis-benchmark is needed: apt-get install redis-tools");
    let cpu = cpu_seconds(pid) - before;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("rror"),
        "redis-benchmark -t {test}: {stdout}\n{stderr}"
    );
    let rows = stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').map(|f| f.trim_matches('"')).collect();
            Some((f.first()?.to_string(), f.get(1)?.parse().ok()?))
        })
        .collect();
    (rows, cpu)
}

/// Raises the open-file limit to the hard one (redis-benchmark -c 1000
/// inherits it).
fn raise_nofile() {
    // SAFETY: getrlimit/setrlimit on a local struct.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

pub fn run() {
    raise_nofile();
    let repeats = std::env::var("REDIS_REPEATS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(3);
    let requests = |pipeline: usize| -> usize {
        std::env::var("REDIS_N")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(if pipeline > 1 { 1_000_000 } else { 200_000 })
    };
    println!(
        "\nRedis under redis-benchmark (-t {}, pinned to core 1); servers pinned to core 0; median of {repeats}, servers in turn per test",
        TESTS.join(",")
    );
    // (config, test name, server) -> [requests/s, server us/request] per round
    let mut runs: HashMap<(usize, String, &str), Vec<[f64; 2]>> = HashMap::new();
    let mut names: Vec<String> = Vec::new();
    for round in 0..repeats {
        for (ci, &(clients, pipeline)) in CONFIGS.iter().enumerate() {
            // Both servers up at once (the idle one costs nothing), each
            // test run against one then the other, first one first, then
            // the other: on a shared machine a slow spell falls on both.
            let servers: Vec<(&str, u16, Server)> = SERVERS
                .iter()
                .map(|&imp| {
                    let port = free_port();
                    (imp, port, start(imp, port))
                })
                .collect();
            for test in TESTS {
                for k in 0..servers.len() {
                    let (imp, port, server) = &servers[(k + round) % servers.len()];
                    let (imp, port, pid) = (*imp, *port, server.child.id());
                    let n = requests(pipeline);
                    let (rows, cpu) = bench_once(pid, port, test, clients, pipeline, n);
                    let total = (n * rows.len()) as f64;
                    for (name, rps) in rows {
                        if !names.contains(&name) {
                            names.push(name.clone());
                        }
                        runs.entry((ci, name, imp))
                            .or_default()
                            .push([rps, cpu * 1e6 / total]);
                    }
                }
            }
        }
    }
    let median = |v: &[[f64; 2]], field: usize| {
        let mut v: Vec<f64> = v.iter().map(|r| r[field]).collect();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    for (ci, &(clients, pipeline)) in CONFIGS.iter().enumerate() {
        println!(
            "\n  -c {clients} -P {pipeline:<3} {:>14} {:>14} {:>8}   {:>12} {:>12} {:>8}",
            "mini_redis/s", "redis/s", "ratio", "mini us/req", "redis us/req", "ratio"
        );
        for name in &names {
            let get = |imp| runs.get(&(ci, name.clone(), imp));
            let (Some(m), Some(r)) = (get("mini_redis"), get("redis-server")) else {
                continue;
            };
            let (mr, rr) = (median(m, 0), median(r, 0));
            let (mc, rc) = (median(m, 1), median(r, 1));
            println!(
                "  {:<15} {:>14.0} {:>14.0} {:>7.2}x   {:>12.2} {:>12.2} {:>7.2}x",
                name,
                mr,
                rr,
                mr / rr,
                mc,
                rc,
                mc / rc
            );
        }
    }
    println!(
        "\n  ratio: mini_redis / redis-server (requests/s: above 1 is faster; us/req: below 1 is cheaper)"
    );
}
