//! fibra and its peers, measured side by side in one run.
//!
//! Each figure is the median of REPEATS runs; the ratio column is the
//! peer's time divided by fibra's (above 1: fibra is faster). One machine's
//! absolute times mean little; ratios taken in one run mean more. Run on an
//! otherwise idle machine, ideally pinned: `taskset -c 1 cargo run --release`.

use std::hint::black_box;
use std::time::{Duration, Instant};

const REPEATS: usize = 7;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Waits until a server (named `what` in the panic) accepts on
/// 127.0.0.1:`port`; panics after 10 s.
fn wait_for_listener(what: &str, port: u16) {
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "{what} server did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Runs `f` (which returns ns per operation) REPEATS times; the median.
fn measure(f: impl Fn() -> f64) -> f64 {
    f(); // warm-up
    median((0..REPEATS).map(|_| f()).collect())
}

struct Table {
    title: &'static str,
    unit: &'static str,
    rows: Vec<(&'static str, f64)>,
}

impl Table {
    fn print(&self) {
        let base = self.rows[0].1;
        println!("\n{}", self.title);
        println!("  {:<34} {:>14} {:>10}", "", self.unit, "vs fibra");
        for (name, v) in &self.rows {
            println!("  {:<34} {:>14.1} {:>9.2}x", name, v, v / base);
        }
    }
}

// ----- yield / switch round trips ------------------------------------------

const SWITCHES: u64 = 2_000_000;

fn fibra_yield() -> f64 {
    fibra::run(|| {
        let other = fibra::spawn(|| {
            for _ in 0..=SWITCHES {
                fibra::yield_now();
            }
        });
        let me = fibra::spawn(|| {
            let t = Instant::now();
            for _ in 0..SWITCHES {
                fibra::yield_now();
            }
            t.elapsed()
        });
        let e = me.join().unwrap();
        other.join().unwrap();
        e.as_nanos() as f64 / SWITCHES as f64
    })
}

/// Both fibers yield from one function, so each switch returns where the
/// return stack predicts; `fibra_yield`'s two closures do not.
#[inline(never)]
fn yield_loop(n: u64) -> std::time::Duration {
    let t = Instant::now();
    for _ in 0..n {
        fibra::yield_now();
    }
    t.elapsed()
}

fn fibra_yield_one_site() -> f64 {
    fibra::run(|| {
        let other = fibra::spawn(|| yield_loop(SWITCHES + 1));
        let me = fibra::spawn(|| yield_loop(SWITCHES));
        let e = me.join().unwrap();
        other.join().unwrap();
        e.as_nanos() as f64 / SWITCHES as f64
    })
}

fn corosensei_resume_suspend() -> f64 {
    use corosensei::{Coroutine, CoroutineResult};
    let mut co = Coroutine::new(|yielder, _input: ()| {
        loop {
            yielder.suspend(());
        }
    });
    let t = Instant::now();
    for _ in 0..SWITCHES {
        match co.resume(()) {
            CoroutineResult::Yield(()) => {}
            CoroutineResult::Return(()) => unreachable!(),
        }
    }
    let e = t.elapsed();
    // SAFETY: the coroutine's stack holds nothing that needs dropping.
    unsafe { co.force_reset() };
    e.as_nanos() as f64 / SWITCHES as f64
}

/// corosensei's round trip handing a `u64` out (`fibra_generator_u64`'s
/// reference: issue 65's value row).
fn corosensei_resume_suspend_u64() -> f64 {
    use corosensei::{Coroutine, CoroutineResult};
    let mut co = Coroutine::new(|yielder, _input: ()| {
        let mut i = 0u64;
        loop {
            yielder.suspend(i);
            i += 1;
        }
    });
    let mut sum = 0u64;
    let t = Instant::now();
    for _ in 0..SWITCHES {
        match co.resume(()) {
            CoroutineResult::Yield(v) => sum = sum.wrapping_add(v),
            CoroutineResult::Return(()) => unreachable!(),
        }
    }
    let e = t.elapsed();
    black_box(sum);
    // SAFETY: the coroutine's stack holds nothing that needs dropping.
    unsafe { co.force_reset() };
    e.as_nanos() as f64 / SWITCHES as f64
}

/// A generator's round trip handing a `u64` out.
fn fibra_generator_u64() -> f64 {
    let mut g = fibra::Generator::new(|y| {
        let mut i = 0u64;
        loop {
            y.yield_(i);
            i += 1;
        }
    });
    let mut sum = 0u64;
    let t = Instant::now();
    for _ in 0..SWITCHES {
        sum = sum.wrapping_add(g.next().unwrap());
    }
    let e = t.elapsed();
    black_box(sum);
    e.as_nanos() as f64 / SWITCHES as f64
}

fn fibra_generator() -> f64 {
    let mut g = fibra::Generator::new(|y| {
        loop {
            y.yield_(());
        }
    });
    let t = Instant::now();
    for _ in 0..SWITCHES {
        black_box(g.next());
    }
    t.elapsed().as_nanos() as f64 / SWITCHES as f64
}

fn may_yield() -> f64 {
    let (tx, rx) = std::sync::mpsc::channel();
    may::coroutine::scope(|s| {
        may::go!(s, || {
            for _ in 0..=SWITCHES {
                may::coroutine::yield_now();
            }
        });
        let tx = tx.clone();
        may::go!(s, move || {
            let t = Instant::now();
            for _ in 0..SWITCHES {
                may::coroutine::yield_now();
            }
            tx.send(t.elapsed()).unwrap();
        });
    });
    rx.recv().unwrap().as_nanos() as f64 / SWITCHES as f64
}

fn tokio_yield() -> f64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let other = tokio::spawn(async {
            for _ in 0..=SWITCHES {
                tokio::task::yield_now().await;
            }
        });
        let me = tokio::spawn(async {
            let t = Instant::now();
            for _ in 0..SWITCHES {
                tokio::task::yield_now().await;
            }
            t.elapsed()
        });
        let e = me.await.unwrap();
        other.await.unwrap();
        e.as_nanos() as f64 / SWITCHES as f64
    })
}

// ----- spawn + join -----------------------------------------------------------

const SPAWNS: u64 = 200_000;

fn fibra_spawn_join() -> f64 {
    fibra::run(|| {
        let t = Instant::now();
        for i in 0..SPAWNS {
            black_box(fibra::spawn(move || black_box(i)).join().unwrap());
        }
        t.elapsed().as_nanos() as f64 / SPAWNS as f64
    })
}

fn tokio_spawn_join() -> f64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let t = Instant::now();
        for i in 0..SPAWNS {
            black_box(tokio::spawn(async move { black_box(i) }).await.unwrap());
        }
        t.elapsed().as_nanos() as f64 / SPAWNS as f64
    })
}

fn may_spawn_join() -> f64 {
    let t = Instant::now();
    for i in 0..SPAWNS / 10 {
        black_box(may::go!(move || black_box(i)).join().unwrap());
    }
    t.elapsed().as_nanos() as f64 / (SPAWNS / 10) as f64
}

fn thread_spawn_join() -> f64 {
    let n = 2_000;
    let t = Instant::now();
    for i in 0..n {
        black_box(std::thread::spawn(move || black_box(i)).join().unwrap());
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

// ----- a storm of sleepers -------------------------------------------------------

const SLEEPERS: usize = 100_000;

fn sleep_target(i: usize) -> Duration {
    spread_target(i, 20_000)
}

/// 2 ms plus a spread of `spread_us` over the sleepers.
fn spread_target(i: usize, spread_us: u64) -> Duration {
    Duration::from_micros(2_000 + (i as u64 * 7919) % spread_us)
}

/// Throughput: spawn SLEEPERS tasks that each sleep 2–22 ms from their own
/// start, join them all. ns per sleeper.
fn fibra_storm() -> f64 {
    fibra::run(|| {
        let t = Instant::now();
        let hs: Vec<_> = (0..SLEEPERS)
            .map(|i| fibra::spawn(move || fibra::sleep(sleep_target(i))))
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        t.elapsed().as_nanos() as f64 / SLEEPERS as f64
    })
}

fn tokio_storm() -> f64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let t = Instant::now();
        let hs: Vec<_> = (0..SLEEPERS)
            .map(|i| tokio::spawn(tokio::time::sleep(sleep_target(i))))
            .collect();
        for h in hs {
            h.await.unwrap();
        }
        t.elapsed().as_nanos() as f64 / SLEEPERS as f64
    })
}

fn may_storm() -> f64 {
    let n = SLEEPERS / 10;
    let t = Instant::now();
    let hs: Vec<_> = (0..n)
        .map(|i| may::go!(move || may::coroutine::sleep(sleep_target(i))))
        .collect();
    hs.into_iter().for_each(|h| h.join().unwrap());
    t.elapsed().as_nanos() as f64 / n as f64
}

/// Lateness: SLEEPERS tasks all parked before the first deadline (a common
/// base 400 ms after spawning, plus 2–22 ms each). Median ns past deadline.
const BASE_MARGIN: Duration = Duration::from_millis(400);

fn fibra_lateness(spread_us: u64) -> f64 {
    use std::{cell::Cell, rc::Rc};
    fibra::run(|| {
        let base = Rc::new(Cell::new(Instant::now()));
        let hs: Vec<_> = (0..SLEEPERS)
            .map(|i| {
                let base = base.clone();
                fibra::spawn(move || {
                    let at = base.get() + spread_target(i, spread_us);
                    fibra::sleep_until(at);
                    at.elapsed().as_nanos() as f64
                })
            })
            .collect();
        base.set(Instant::now() + BASE_MARGIN); // before any of them starts
        median(hs.into_iter().map(|h| h.join().unwrap()).collect())
    })
}

fn tokio_lateness(spread_us: u64) -> f64 {
    use std::sync::{Arc, OnceLock};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let base: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
        let hs: Vec<_> = (0..SLEEPERS)
            .map(|i| {
                let base = base.clone();
                tokio::spawn(async move {
                    let at = *base.get().unwrap() + spread_target(i, spread_us);
                    tokio::time::sleep_until(at.into()).await;
                    at.elapsed().as_nanos() as f64
                })
            })
            .collect();
        base.set(Instant::now() + BASE_MARGIN).unwrap(); // before any task runs
        let mut late = Vec::with_capacity(SLEEPERS);
        for h in hs {
            late.push(h.await.unwrap());
        }
        median(late)
    })
}

fn may_lateness(spread_us: u64) -> f64 {
    use std::sync::{Arc, OnceLock};
    let n = SLEEPERS / 10;
    let base: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let start = base.clone();
    let hs: Vec<_> = (0..n)
        .map(|i| {
            let base = base.clone();
            may::go!(move || {
                while base.get().is_none() {
                    may::coroutine::yield_now();
                }
                let at = *base.get().unwrap() + spread_target(i, spread_us);
                may::coroutine::sleep(at.saturating_duration_since(Instant::now()));
                at.elapsed().as_nanos() as f64
            })
        })
        .collect();
    start.set(Instant::now() + BASE_MARGIN).unwrap();
    median(hs.into_iter().map(|h| h.join().unwrap()).collect())
}

mod channels;
mod coro_floor;
mod echo;
mod epoll_floor;
mod floor;
#[cfg(feature = "hook")]
mod hook;
mod http;
/// fibra's HTTP session (the examples' own code), for the tokio servers.
#[path = "../../../examples/http_hello/http1.rs"]
#[allow(dead_code)]
mod http1;
mod https;
mod hyper_table;
mod interleave;
mod million;
mod redis;
mod sync;
mod targets;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("echo-server") {
        echo::server(&args[1], args[2].parse().unwrap());
        return;
    }
    if let Some(cmd @ ("echo-load" | "echo-load2")) = args.first().map(String::as_str) {
        // `echo-load PORT CONNS SIZE`: the load generator alone (pinned to
        // core 1), against a server started by hand (to profile it with
        // perf, say); `echo-load2`: the two-worker one, unpinned, as the
        // `echo2` table runs it.
        let (port, conns, size) = (
            args[1].parse().unwrap(),
            args[2].parse().unwrap(),
            args[3].parse().unwrap(),
        );
        match cmd {
            "echo-load" => println!("{} round trips", echo::load_only(port, conns, size)),
            _ => {
                let (trips, p50, p99) = echo::load_two_only(port, conns, size);
                println!("{trips} round trips, p50 {p50:.1} us, p99 {p99:.1} us");
            }
        }
        return;
    }
    if args.first().map(String::as_str) == Some("echo-il") {
        interleave::run(&args[1..]);
        return;
    }
    if args.first().map(String::as_str) == Some("hyper-server") {
        hyper_table::server(&args[1], args[2].parse().unwrap());
        return;
    }
    if args.first().map(String::as_str) == Some("http-server") {
        http::server(&args[1], args[2].parse().unwrap());
        return;
    }
    if args.first().map(String::as_str) == Some("https-server") {
        https::server(&args[1], args[2].parse().unwrap(), &args[3], &args[4]);
        return;
    }
    if args.first().map(String::as_str) == Some("million-child") {
        million::child(&args[1], args[2].parse().unwrap());
        return;
    }
    may::config().set_workers(1);
    if args.first().map(String::as_str) == Some("targets") {
        // Issue 20's rows, as ratios to their references: asked for by
        // name only (about 15 minutes).
        targets::run();
        return;
    }
    let want = |name: &str| args.is_empty() || args.iter().any(|a| a == name);
    println!("fibra vs peers: medians of {REPEATS} runs, one process");

    if want("switch") {
        Table {
            title: "Yield round trip (two switches: fibra, may and tokio yield between two tasks; a generator or corosensei resume + suspend)",
            unit: "ns/round trip",
            rows: vec![
                ("fibra yield_now (fiber <-> fiber)", measure(fibra_yield)),
                ("  same, both fibers in one function", measure(fibra_yield_one_site)),
                ("fibra Generator next + yield_", measure(fibra_generator)),
                ("corosensei resume + suspend", measure(corosensei_resume_suspend)),
                ("fibra switch alone", measure(floor::with_fp_words)),
                ("  same, without FP control words", measure(floor::without_fp_words)),
                ("  same, MXCSR stored, never loaded", measure(floor::mxcsr_stored_only)),
                ("  two MXCSR reads (stmxcsr) alone", measure(floor::two_mxcsr_reads)),
                ("  same, from two loops (no scheduler)", measure(floor::two_sites)),
                ("may yield_now (1 worker)", measure(may_yield)),
                ("tokio yield_now (current_thread)", measure(tokio_yield)),
            ],
        }
        .print();
    }
    if want("spawn") {
        Table {
            title: "Spawn + join of an empty task, one at a time",
            unit: "ns/spawn+join",
            rows: vec![
                ("fibra spawn + join", measure(fibra_spawn_join)),
                (
                    "tokio spawn + await (current_thread)",
                    measure(tokio_spawn_join),
                ),
                ("may go! + join (1 worker)", measure(may_spawn_join)),
                ("std::thread spawn + join", measure(thread_spawn_join)),
            ],
        }
        .print();
    }
    if want("sync") {
        sync::run();
    }
    if args.iter().any(|a| a == "channels") {
        // crossbeam-channel's benchmark shapes beside Go: asked for by name
        // only (a few minutes, and it runs `go`).
        channels::run();
    }
    if want("echo") {
        echo::run();
    }
    if want("echo2") {
        echo::run_two_workers();
    }
    if want("hook") {
        #[cfg(feature = "hook")]
        hook::run();
        #[cfg(not(feature = "hook"))]
        println!("\n(the hook table needs `--features hook`)");
    }
    if want("http") {
        http::run();
    }
    if want("https") {
        https::run();
    }
    if want("hyper") {
        hyper_table::run();
    }
    if want("redis") {
        redis::run();
    }
    if want("million") {
        million::run();
    }
    if want("sleepers") {
        Table {
            title: "A storm of 100 000 sleepers (2-22 ms each from its own start): spawn, sleep, join",
            unit: "ns/sleeper",
            rows: vec![
                ("fibra", measure(fibra_storm)),
                ("tokio (current_thread)", measure(tokio_storm)),
                ("may (1 worker, 10 000 sleepers)", measure(may_storm)),
            ],
        }
        .print();
        let once = |f: fn(u64) -> f64, spread_us: u64| {
            f(spread_us);
            median((0..3).map(|_| f(spread_us)).collect()) / 1000.0
        };
        for spread_us in [1_000_000, 20_000] {
            Table {
                title: match spread_us {
                    1_000_000 => "Timer lateness, 100 000 sleepers all parked first, due over 1 s (timer precision)",
                    _ => "Timer lateness, 100 000 sleepers all parked first, due over 20 ms (saturated: throughput-bound)",
                },
                unit: "median us late",
                rows: vec![
                    ("fibra", once(fibra_lateness, spread_us)),
                    ("tokio (current_thread)", once(tokio_lateness, spread_us)),
                    ("may (1 worker, 10 000 sleepers)", once(may_lateness, spread_us)),
                ],
            }
            .print();
        }
    }
}
