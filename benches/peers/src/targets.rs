//! Issue 20's table, row by row: fibra against the reference the issue
//! names for it, measured in pairs (fibra and the reference back to back,
//! each first in every other pair, so a slow spell of this shared machine
//! falls on both), each pair giving
//! one ratio; printed as the median ratio of the pairs with its spread,
//! beside the target and whether the median meets it.
//!
//! `cargo run --release -- targets` runs them all (about 15 minutes on two
//! cores); `TARGETS=switch,echo` picks rows (`switch`, `echo`, `echo2`,
//! `p99`, `million`), `TARGET_PAIRS` sets the pairs per row (default 5). Rows
//! without a target (`coro-floor`, `epoll-floor-bufs`) place the floor
//! between fibra and the epoll loop. The echo rows (CPU and p99) are not
//! pairs of runs but rounds of servers interleaved in 50 ms windows
//! (`TARGET_ROUNDS`, default 300; see `interleave`).

use crate::{echo, floor, interleave, million};

/// One row's pairs: fibra's figure and the reference's, per pair.
struct Pairs {
    fibra: Vec<f64>,
    reference: Vec<f64>,
}

impl Pairs {
    fn measure(
        n: usize,
        mut fibra: impl FnMut() -> f64,
        mut reference: impl FnMut() -> f64,
    ) -> Pairs {
        let mut p = Pairs {
            fibra: Vec::new(),
            reference: Vec::new(),
        };
        // Fibra first in even pairs, the reference in odd ones: what runs
        // just before a run can move it (see `million`).
        for i in 0..n {
            if i % 2 == 0 {
                p.fibra.push(fibra());
                p.reference.push(reference());
            } else {
                p.reference.push(reference());
                p.fibra.push(fibra());
            }
        }
        p
    }

    fn print(&self, what: &str, unit: &str, reference: &str, target: impl Into<Option<f64>>) {
        let target = target.into();
        let ratios: Vec<f64> = self
            .fibra
            .iter()
            .zip(&self.reference)
            .map(|(f, r)| f / r)
            .collect();
        let (r, lo, hi) = spread(ratios);
        let verdict = match target {
            Some(t) if r <= t => format!("<= {t:.2}x: met"),
            Some(t) => format!("<= {t:.2}x: NOT met"),
            None => "(no target)".to_string(),
        };
        println!(
            "  {:<44} {:>9.2} {:<6} {:<24} {:>9.2} {:>6.2}x ({:.2}-{:.2})  {}",
            what,
            spread(self.fibra.clone()).0,
            unit,
            reference,
            spread(self.reference.clone()).0,
            r,
            lo,
            hi,
            verdict
        );
    }
}

/// Median, minimum and maximum.
fn spread(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// Rounds of the interleaved echo rows (`TARGET_ROUNDS`, 300).
fn rounds() -> usize {
    std::env::var("TARGET_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(300)
}

fn wanted(row: &str) -> bool {
    std::env::var("TARGETS").map_or(true, |list| list.split(',').any(|w| w == row))
}

pub fn run() {
    let n = std::env::var("TARGET_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(5);
    println!("\nIssue 20's targets: fibra / reference per pair, median of {n} pairs (min-max)");
    // The switch rows' ratios depend on the CPU, not only on the code
    // (`stmxcsr` and corosensei's round trip cost differently on Zen 2 and
    // Zen 4): say which one this run had.
    println!("  on {}", cpu());
    println!(
        "  {:<44} {:>9} {:<6} {:<24} {:>9} {:>7}",
        "", "fibra", "", "reference", "", "ratio"
    );
    if wanted("switch") {
        switch_rows(n);
    }
    if wanted("echo") {
        echo_rows(false);
    }
    if wanted("echo2") {
        echo_rows(true);
    }
    if wanted("p99") {
        p99_rows();
    }
    if wanted("million") {
        million_rows(n);
    }
}

fn switch_rows(n: usize) {
    let coro = crate::corosensei_resume_suspend;
    Pairs::measure(n, floor::with_fp_words, coro).print(
        "the switch alone, FP words kept",
        "ns/rt",
        "corosensei resume+susp.",
        2.0,
    );
    Pairs::measure(n, floor::mxcsr_stored_only, coro).print(
        "  its floor: MXCSR stored, never loaded",
        "ns/rt",
        "corosensei resume+susp.",
        2.0,
    );
    // Issue 65's targets: 1.2x with nothing handed out, 1.5x with a u64.
    Pairs::measure(n, crate::fibra_generator, coro).print(
        "Generator next + yield_",
        "ns/rt",
        "corosensei resume+susp.",
        1.2,
    );
    Pairs::measure(
        n,
        crate::fibra_generator_u64,
        crate::corosensei_resume_suspend_u64,
    )
    .print(
        "  the same, a u64 handed out",
        "ns/rt",
        "corosensei, a u64",
        1.5,
    );
    // `fibra_yield` times round trips of two yields; the row is per yield.
    Pairs::measure(n, || crate::fibra_yield() / 2.0, coro).print(
        "yield_now, per yield",
        "ns",
        "corosensei resume+susp.",
        2.0,
    );
    // The same switches with no scheduler: fibra's switch made from each
    // context's own loop, as two fibers' loops make it (see
    // `floor::two_sites`).
    Pairs::measure(n, || floor::two_sites() / 2.0, coro).print(
        "  its floor: the switch alone, two loops",
        "ns",
        "corosensei resume+susp.",
        2.0,
    );
}

/// Server CPU per round trip against the floor's, in every configuration
/// of the row.
fn echo_rows(two_workers: bool) {
    let (fibra, floor) = if two_workers {
        echo::unpin();
        ("fibra-2w", "epoll-floor-2w")
    } else {
        echo::pin_to(1);
        ("fibra", "epoll-floor")
    };
    let workers = if two_workers { 2 } else { 1 };
    let shared = if two_workers {
        "fibra-shared-2w"
    } else {
        "fibra-shared"
    };
    // The CPU rows: every server of a configuration up at once, the load
    // moved from one to the next every 50 ms (see `interleave`), so each
    // round's ratio compares runs a fraction of a second apart; this
    // host's speed drifts from second to second, which 3 s runs back to
    // back (the pairs of the other rows) do not cancel.
    let rounds = rounds();
    println!(
        "  (echo rows: the servers interleaved in 50 ms windows, median of {rounds} rounds' ratios)"
    );
    for (conns, size) in [
        (1, 64),
        (50, 64),
        (1000, 64),
        (1, 4096),
        (50, 4096),
        (1000, 4096),
    ] {
        let mut imps = vec![fibra, floor];
        // The floor of any stackful design: the floor's loop with a
        // corosensei coroutine per connection (its own stack, its buffer
        // on it) and no runtime. Its distance to the epoll floor is what
        // stackful tasks cost; fibra's distance to it, what fibra's
        // runtime costs.
        if !two_workers {
            imps.push("coro-floor");
        }
        // At 1 000 connections: the same server written as the floor is
        // (no buffer while a connection waits, `readable`; one buffer per
        // thread, `try_read`, `try_write`): what the runtime costs when
        // the program is the same. And the floor with a buffer per
        // connection: how much of the gap fibra's 16 KiB buffer per
        // connection (tokio's and may's servers have one too), cold after
        // the other 999, is alone.
        if conns == 1000 {
            imps.push(shared);
            if !two_workers {
                imps.push("epoll-floor-bufs");
            }
        }
        let plan = interleave::Plan {
            conns,
            size,
            window: std::time::Duration::from_millis(50),
            rounds,
            workers,
        };
        let us = interleave::interleave_kinds(&imps, &plan);
        let pairs = |a: &str, b: &str| {
            let of = |imp: &str| -> Vec<f64> {
                let i = imps.iter().position(|&x| x == imp).unwrap();
                us[i].per_trip.iter().map(|ns| ns / 1e3).collect()
            };
            Pairs {
                fibra: of(a),
                reference: of(b),
            }
        };
        pairs(fibra, floor).print(
            &format!("echo CPU/trip, {workers}w, {conns} x {size} B"),
            "us",
            "epoll floor",
            1.05,
        );
        if !two_workers {
            pairs("coro-floor", floor).print(
                "  stackful floor: coroutines, no runtime",
                "us",
                "epoll floor",
                None,
            );
        }
        if conns == 1000 {
            pairs(shared, floor).print(
                "  the same, fibra with one buffer per thread",
                "us",
                "epoll floor",
                1.05,
            );
            if !two_workers {
                pairs(fibra, "epoll-floor-bufs").print(
                    "  the same, floor with per-conn. buffers",
                    "us",
                    "epoll-floor-bufs",
                    1.05,
                );
            }
        }
    }
}

fn million_rows(n: usize) {
    let mut bytes = Vec::new();
    let p = Pairs::measure(
        n,
        || {
            let (secs, b) = million::run_child("fibra");
            bytes.push(b);
            secs
        },
        || million::run_child("guarded").0,
    );
    p.print(
        "1 M fibers spawned, started, parked",
        "s",
        "one guarded page each",
        1.2,
    );
    // fibra faults in a burst's stack pages a chunk at a time (see
    // `stack::advice::populate_tops`): the same against a reference that
    // gets its pages the same way, not by a fault each.
    Pairs::measure(
        n,
        || million::run_child("fibra").0,
        || million::run_child("populated").0,
    )
    .print(
        "  the same, reference populated as fibra is",
        "s",
        "one page each, populated",
        1.2,
    );
    let (b, lo, hi) = spread(bytes);
    let verdict = if b <= 4608.0 { "met" } else { "NOT met" };
    println!(
        "  {:<44} {:>9.0} {:<6} {:<24} {:>9} ({:.0}-{:.0})  <= 4608 B: {}",
        "  resident memory per fiber", b, "B", "", "", lo, hi, verdict
    );
}

/// The CPU this runs on, as /proc/cpuinfo names it: vendor, family and
/// model (decimal, as there), and the model name.
fn cpu() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
            .and_then(|l| l.split_once(':'))
            .map_or("?", |(_, v)| v.trim())
            .to_string()
    };
    format!(
        "{} family {} model {} ({})",
        field("vendor_id"),
        field("cpu family"),
        field("model"),
        field("model name")
    )
}

/// The two-worker echo tail at 100 connections against tokio's and the
/// floor's: the three servers interleaved as the CPU rows are, each
/// round's p99 of each (every eighth trip's latency), and the p99 of all
/// of a server's samples together.
fn p99_rows() {
    echo::unpin();
    let imps = ["fibra-2w", "tokio-2w", "epoll-floor-2w"];
    let plan = interleave::Plan {
        conns: 100,
        size: 64,
        window: std::time::Duration::from_millis(50),
        rounds: rounds(),
        workers: 2,
    };
    let mut got = interleave::interleave_kinds(&imps, &plan);
    let pooled: Vec<f64> = got
        .iter_mut()
        .map(|m| interleave::quantile(&mut m.latencies, 0.99))
        .collect();
    for (i, reference) in imps.iter().enumerate().skip(1) {
        Pairs {
            fibra: got[0].p99.clone(),
            reference: got[i].p99.clone(),
        }
        .print("echo p99, 2w, 100 x 64 B", "us", reference, 1.0);
        println!(
            "    p99 of all samples: fibra {:.0} us, {reference} {:.0} us: {:.2}x",
            pooled[0],
            pooled[i],
            pooled[0] / pooled[i]
        );
    }
}
