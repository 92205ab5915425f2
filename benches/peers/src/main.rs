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
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
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
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
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

// ----- a storm of sleepers: wall time and median lateness ----------------------

const SLEEPERS: usize = 100_000;

fn sleep_target(i: usize) -> Duration {
    Duration::from_micros(2_000 + (i as u64 * 7919) % 20_000)
}

/// (ns per sleeper for the whole storm, median lateness in ns)
fn fibra_sleepers() -> (f64, f64) {
    fibra::run(|| {
        let t = Instant::now();
        let hs: Vec<_> = (0..SLEEPERS)
            .map(|i| {
                fibra::spawn(move || {
                    let at = Instant::now() + sleep_target(i);
                    fibra::sleep_until(at);
                    at.elapsed().as_nanos() as f64
                })
            })
            .collect();
        let late: Vec<f64> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        (t.elapsed().as_nanos() as f64 / SLEEPERS as f64, median(late))
    })
}

fn tokio_sleepers() -> (f64, f64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let t = Instant::now();
        let hs: Vec<_> = (0..SLEEPERS)
            .map(|i| {
                tokio::spawn(async move {
                    let at = Instant::now() + sleep_target(i);
                    tokio::time::sleep_until(at.into()).await;
                    at.elapsed().as_nanos() as f64
                })
            })
            .collect();
        let mut late = Vec::with_capacity(SLEEPERS);
        for h in hs {
            late.push(h.await.unwrap());
        }
        (t.elapsed().as_nanos() as f64 / SLEEPERS as f64, median(late))
    })
}

fn may_sleepers() -> (f64, f64) {
    let t = Instant::now();
    let hs: Vec<_> = (0..SLEEPERS / 10)
        .map(|i| {
            may::go!(move || {
                let at = Instant::now() + sleep_target(i);
                may::coroutine::sleep(at - Instant::now());
                at.elapsed().as_nanos() as f64
            })
        })
        .collect();
    let late: Vec<f64> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    (t.elapsed().as_nanos() as f64 / (SLEEPERS / 10) as f64, median(late))
}

fn main() {
    may::config().set_workers(1);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let want = |name: &str| args.is_empty() || args.iter().any(|a| a == name);
    println!("fibra vs peers: medians of {REPEATS} runs, one process");

    if want("switch") {
        Table {
            title: "Yield round trip (two switches: fibra, may and tokio yield between two tasks; corosensei resume + suspend)",
            unit: "ns/round trip",
            rows: vec![
                ("fibra yield_now (fiber <-> fiber)", measure(fibra_yield)),
                ("corosensei resume + suspend", measure(corosensei_resume_suspend)),
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
                ("tokio spawn + await (current_thread)", measure(tokio_spawn_join)),
                ("may go! + join (1 worker)", measure(may_spawn_join)),
                ("std::thread spawn + join", measure(thread_spawn_join)),
            ],
        }
        .print();
    }
    if want("sleepers") {
        let runs = |f: fn() -> (f64, f64)| {
            f();
            let r: Vec<(f64, f64)> = (0..3).map(|_| f()).collect();
            (
                median(r.iter().map(|x| x.0).collect()),
                median(r.iter().map(|x| x.1).collect()),
            )
        };
        let rows = [
            ("fibra", runs(fibra_sleepers)),
            ("tokio (current_thread)", runs(tokio_sleepers)),
            ("may (1 worker, 10 000 sleepers)", runs(may_sleepers)),
        ];
        println!("\nA storm of {SLEEPERS} sleepers (2-22 ms each): spawn, sleep, join");
        println!(
            "  {:<34} {:>14} {:>10} {:>18}",
            "", "ns/sleeper", "vs fibra", "median late (us)"
        );
        for (name, (per, late)) in rows {
            println!(
                "  {:<34} {:>14.1} {:>9.2}x {:>18.1}",
                name,
                per,
                per / rows[0].1.0,
                late / 1000.0
            );
        }
    }
}
