//! The `channels` table: the shapes of crossbeam-channel's own benchmark
//! suite (its `benchmarks/README.md`) for fibra::channel, between fibers of
//! one thread and between OS threads, beside crossbeam-channel, kanal,
//! flume, std::sync::mpsc and Go 1.19 (`go/channels.go`, GOMAXPROCS=1 and
//! 2). kanal, which calls itself the fastest Rust channel, has no select:
//! its select rows stay empty. `thr/best` is fibra between threads against
//! the faster of crossbeam and kanal.
//!
//! Shapes, with N messages (`CHANNELS_MESSAGES`, 200 000 by default) and
//! T = 4: `seq` sends all N from one task, then receives them; `spsc` one
//! sender, one receiver; `mpsc` T senders of N/T each, one receiver;
//! `mpmc` T senders and T receivers; `select_rx` one sender per channel
//! over T channels, one receiver selecting over all T; `select_both` T
//! senders selecting a send over T channels and T receivers selecting a
//! receive. Each for bounded(0), bounded(1), bounded(N) and unbounded
//! (`seq` only where the channel holds all N). Every figure is ns per
//! message, median of REPEATS runs (taken in turns; 3, or
//! `CHANNELS_REPEATS`), and its spread,
//! (max - min) / median.

use std::hint::black_box;
use std::process::Command;
use std::time::Instant;

const THREADS: usize = 4;
/// Runs of each row (`CHANNELS_REPEATS`, 3 by default): rows between
/// threads on two cores spread by ±50 % from run to run; more runs steady
/// their medians.
fn repeats() -> usize {
    std::env::var("CHANNELS_REPEATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}
const PINGS: usize = 100_000;

// ----- the channels, behind one interface --------------------------------

/// A channel implementation carrying `usize` messages.
trait Kit: 'static {
    type Tx: Clone + Send + 'static;
    type Rx: Send + 'static;
    fn make(cap: Option<usize>) -> (Self::Tx, Self::Rx);
    fn send(tx: &Self::Tx, m: usize);
    fn recv(rx: &Self::Rx) -> usize;
}

/// One with cloneable receivers (all but std's mpsc).
trait Multi: Kit {
    fn share(rx: &Self::Rx) -> Self::Rx;
}

/// One with a select: crossbeam-channel and fibra::channel. (flume's
/// Selector hung here in select_both over bounded(0), a known hang, its
/// issue 44; crossbeam's suite runs no select for flume either.)
trait Sel: Multi {
    fn select_recv(rxs: &[Self::Rx]) -> usize;
    fn select_send(txs: &[Self::Tx], m: usize);
}

/// crossbeam-channel and fibra::channel have the same API.
macro_rules! same_api {
    ($kit:ident, $($c:ident)::+) => {
        struct $kit;
        impl Kit for $kit {
            type Tx = $($c)::+::Sender<usize>;
            type Rx = $($c)::+::Receiver<usize>;
            fn make(cap: Option<usize>) -> (Self::Tx, Self::Rx) {
                use $($c)::+ as c;
                cap.map_or_else(c::unbounded, c::bounded)
            }
            fn send(tx: &Self::Tx, m: usize) {
                tx.send(m).unwrap();
            }
            fn recv(rx: &Self::Rx) -> usize {
                rx.recv().unwrap()
            }
        }
        impl Multi for $kit {
            fn share(rx: &Self::Rx) -> Self::Rx {
                rx.clone()
            }
        }
        impl Sel for $kit {
            fn select_recv(rxs: &[Self::Rx]) -> usize {
                use $($c)::+ as c;
                let mut sel = c::Select::new();
                rxs.iter().for_each(|r| {
                    sel.recv(r);
                });
                let op = sel.select();
                let i = op.index();
                op.recv(&rxs[i]).unwrap()
            }
            fn select_send(txs: &[Self::Tx], m: usize) {
                use $($c)::+ as c;
                let mut sel = c::Select::new();
                txs.iter().for_each(|t| {
                    sel.send(t);
                });
                let op = sel.select();
                let i = op.index();
                op.send(&txs[i], m).unwrap()
            }
        }
    };
}

same_api!(Fibra, fibra::channel);
same_api!(Crossbeam, crossbeam_channel);

struct Flume;
impl Kit for Flume {
    type Tx = flume::Sender<usize>;
    type Rx = flume::Receiver<usize>;
    fn make(cap: Option<usize>) -> (Self::Tx, Self::Rx) {
        cap.map_or_else(flume::unbounded, flume::bounded)
    }
    fn send(tx: &Self::Tx, m: usize) {
        tx.send(m).unwrap();
    }
    fn recv(rx: &Self::Rx) -> usize {
        rx.recv().unwrap()
    }
}
impl Multi for Flume {
    fn share(rx: &Self::Rx) -> Self::Rx {
        rx.clone()
    }
}

/// kanal: `bounded(0)` is a rendezvous, as crossbeam's.
struct Kanal;
impl Kit for Kanal {
    type Tx = kanal::Sender<usize>;
    type Rx = kanal::Receiver<usize>;
    fn make(cap: Option<usize>) -> (Self::Tx, Self::Rx) {
        cap.map_or_else(kanal::unbounded, kanal::bounded)
    }
    fn send(tx: &Self::Tx, m: usize) {
        tx.send(m).unwrap();
    }
    fn recv(rx: &Self::Rx) -> usize {
        rx.recv().unwrap()
    }
}
impl Multi for Kanal {
    fn share(rx: &Self::Rx) -> Self::Rx {
        rx.clone()
    }
}

/// std's mpsc: `channel()` unbounded, `sync_channel(cap)` bounded.
struct Std;
#[derive(Clone)]
enum StdTx {
    Async(std::sync::mpsc::Sender<usize>),
    Sync(std::sync::mpsc::SyncSender<usize>),
}
impl Kit for Std {
    type Tx = StdTx;
    type Rx = std::sync::mpsc::Receiver<usize>;
    fn make(cap: Option<usize>) -> (Self::Tx, Self::Rx) {
        match cap {
            None => {
                let (t, r) = std::sync::mpsc::channel();
                (StdTx::Async(t), r)
            }
            Some(cap) => {
                let (t, r) = std::sync::mpsc::sync_channel(cap);
                (StdTx::Sync(t), r)
            }
        }
    }
    fn send(tx: &Self::Tx, m: usize) {
        match tx {
            StdTx::Async(t) => t.send(m).unwrap(),
            StdTx::Sync(t) => t.send(m).unwrap(),
        }
    }
    fn recv(rx: &Self::Rx) -> usize {
        rx.recv().unwrap()
    }
}

// ----- where the tasks run --------------------------------------------------

#[derive(Clone, Copy)]
enum On {
    /// Every task a fiber of one thread (`fibra::run`).
    Fibers,
    /// Every task an OS thread, the measuring one included.
    Threads,
}

enum Task {
    Fiber(fibra::JoinHandle<()>),
    Thread(std::thread::JoinHandle<()>),
}

fn go(on: On, f: impl FnOnce() + Send + 'static) -> Task {
    match on {
        On::Fibers => Task::Fiber(fibra::spawn(f)),
        On::Threads => Task::Thread(std::thread::spawn(f)),
    }
}

fn join(tasks: Vec<Task>) {
    for t in tasks {
        match t {
            Task::Fiber(h) => h.join().unwrap(),
            Task::Thread(h) => h.join().unwrap(),
        }
    }
}

/// Runs `body` where `on` says (in a fresh `fibra::run` for fibers): its
/// time, ns per message.
fn timed(on: On, n: usize, body: impl FnOnce()) -> f64 {
    let run = || {
        let t = Instant::now();
        body();
        t.elapsed().as_nanos() as f64 / n as f64
    };
    match on {
        On::Fibers => fibra::run(run),
        On::Threads => run(),
    }
}

// ----- the shapes ---------------------------------------------------------------

const SHAPES: [&str; 6] = ["seq", "spsc", "mpsc", "mpmc", "select_rx", "select_both"];

fn put<K: Kit>(tx: &K::Tx, count: usize) {
    (0..count).for_each(|i| K::send(tx, i));
}

fn take<K: Kit>(rx: &K::Rx, count: usize) {
    for _ in 0..count {
        black_box(K::recv(rx));
    }
}

fn producers<K: Kit>(on: On, tx: &K::Tx, each: usize) -> Vec<Task> {
    (0..THREADS)
        .map(|_| {
            let tx = tx.clone();
            go(on, move || put::<K>(&tx, each))
        })
        .collect()
}

/// The shapes every implementation has (std's mpsc included).
fn single<K: Kit>(on: On, shape: &str, cap: Option<usize>, n: usize) -> Option<f64> {
    let each = n / THREADS;
    Some(match shape {
        "seq" => timed(on, n, || {
            let (tx, rx) = K::make(cap);
            put::<K>(&tx, n);
            take::<K>(&rx, n);
        }),
        "spsc" => timed(on, n, || {
            let (tx, rx) = K::make(cap);
            let sender = go(on, move || put::<K>(&tx, n));
            take::<K>(&rx, n);
            join(vec![sender]);
        }),
        "mpsc" => timed(on, n, || {
            let (tx, rx) = K::make(cap);
            let senders = producers::<K>(on, &tx, each);
            take::<K>(&rx, each * THREADS);
            join(senders);
        }),
        _ => return None,
    })
}

fn multi<K: Multi>(on: On, shape: &str, cap: Option<usize>, n: usize) -> Option<f64> {
    let each = n / THREADS;
    Some(match shape {
        "mpmc" => timed(on, n, || {
            let (tx, rx) = K::make(cap);
            let mut tasks = producers::<K>(on, &tx, each);
            for _ in 0..THREADS {
                let rx = K::share(&rx);
                tasks.push(go(on, move || take::<K>(&rx, each)));
            }
            join(tasks);
        }),
        _ => return single::<K>(on, shape, cap, n),
    })
}

fn sel<K: Sel>(on: On, shape: &str, cap: Option<usize>, n: usize) -> Option<f64> {
    let each = n / THREADS;
    let sets = || {
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..THREADS).map(|_| K::make(cap)).unzip();
        (txs, rxs)
    };
    Some(match shape {
        "select_rx" => timed(on, n, || {
            let (txs, rxs) = sets();
            // Clones: `txs` keeps every channel connected (a disconnected
            // one would be ready in every select).
            let senders = txs
                .iter()
                .map(|tx| {
                    let tx = tx.clone();
                    go(on, move || put::<K>(&tx, each))
                })
                .collect();
            for _ in 0..each * THREADS {
                black_box(K::select_recv(&rxs));
            }
            join(senders);
        }),
        "select_both" => timed(on, n, || {
            let (txs, rxs) = sets();
            let mut tasks = Vec::new();
            for _ in 0..THREADS {
                let txs = txs.clone();
                tasks.push(go(on, move || {
                    (0..each).for_each(|i| K::select_send(&txs, i))
                }));
                let rxs: Vec<_> = rxs.iter().map(K::share).collect();
                tasks.push(go(on, move || {
                    for _ in 0..each {
                        black_box(K::select_recv(&rxs));
                    }
                }));
            }
            join(tasks);
        }),
        _ => return multi::<K>(on, shape, cap, n),
    })
}

// ----- ping-pong between two fibers ---------------------------------------------

/// Round trips between this fiber and an echoing one, over two channels
/// made by `make`: ns per round trip.
fn ping_pong<Tx: 'static, Rx: 'static>(
    make: impl Fn() -> (Tx, Rx),
    send: fn(&Tx, usize),
    recv: fn(&Rx) -> Option<usize>,
) -> f64 {
    fibra::run(|| {
        let ((there_tx, there_rx), (back_tx, back_rx)) = (make(), make());
        let echo = fibra::spawn(move || {
            while let Some(v) = recv(&there_rx) {
                send(&back_tx, v);
            }
        });
        let t = Instant::now();
        for i in 0..PINGS {
            send(&there_tx, i);
            black_box(recv(&back_rx));
        }
        let e = t.elapsed();
        drop(there_tx);
        echo.join().unwrap();
        e.as_nanos() as f64 / PINGS as f64
    })
}

fn fibra_ping_pong(cap: usize) -> f64 {
    use fibra::channel::{Receiver, Sender, bounded};
    ping_pong(
        || bounded(cap),
        |t: &Sender<usize>, v| t.send(v).unwrap(),
        |r: &Receiver<usize>| r.recv().ok(),
    )
}

fn fibra_sync_ping_pong() -> f64 {
    use fibra::sync::mpsc::{Receiver, Sender, channel};
    ping_pong(
        channel,
        |t: &Sender<usize>, v| t.send(v).unwrap(),
        |r: &Receiver<usize>| r.recv().ok(),
    )
}

// ----- Go ----------------------------------------------------------------------

/// `go run go/channels.go` with GOMAXPROCS=`procs`: each row's times in
/// ns per message (per round trip for ping-pong), or None without `go`.
fn go_rows(procs: u32, n: usize) -> Option<Vec<(String, Vec<f64>)>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/go");
    let out = Command::new("go")
        .args(["run", "channels.go"])
        .args([n, repeats(), PINGS].map(|v| v.to_string()))
        .env("GOMAXPROCS", procs.to_string())
        .current_dir(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8(out.stdout).ok()?;
    Some(
        text.lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let name = w.next()?.to_string();
                let per = if name.ends_with("pingpong") { PINGS } else { n };
                let secs = w.map(|s| s.parse::<f64>().unwrap() * 1e9 / per as f64);
                Some((name, secs.collect()))
            })
            .collect(),
    )
}

fn go_find(rows: &Option<Vec<(String, Vec<f64>)>>, name: &str) -> Option<Vec<f64>> {
    rows.as_ref()?
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
}

// ----- printing ------------------------------------------------------------------

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// "median ±spread%", or "-" where the shape does not exist.
fn cell(v: &Option<Vec<f64>>) -> String {
    match v {
        None => "-".into(),
        Some(v) => {
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
            let m = median(v);
            format!("{:.0} ±{:.0}%", m, (hi - lo) / m * 100.0)
        }
    }
}

fn ratio(a: &Option<Vec<f64>>, b: &Option<Vec<f64>>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:.2}", median(a) / median(b)),
        _ => "-".into(),
    }
}

/// One line of a table: a name `width` wide, then right-aligned columns.
fn line(width: usize, name: &str, cols: &[impl std::fmt::Display]) {
    print!("  {name:<width$}");
    cols.iter().for_each(|c| print!(" {c:>11}"));
    println!();
}

/// Runs each of `imps` REPEATS times, in turns, the turn's first moving
/// one place each round: no implementation always runs right after the
/// same other (a run between threads right after one between fibers was
/// slower, whichever library it was). Their times (None where a shape
/// does not exist for one).
fn rounds(imps: &[&dyn Fn() -> Option<f64>]) -> Vec<Option<Vec<f64>>> {
    let mut all: Vec<Option<Vec<f64>>> = vec![Some(Vec::new()); imps.len()];
    for round in 0..repeats() {
        for k in 0..imps.len() {
            let i = (round + k) % imps.len();
            match imps[i]() {
                Some(t) => all[i].as_mut().map_or((), |v| v.push(t)),
                None => all[i] = None,
            }
        }
    }
    all
}

pub fn run() {
    let n: usize = std::env::var("CHANNELS_MESSAGES")
        .ok()
        .map_or(200_000, |v| v.parse().unwrap());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\nChannels: crossbeam-channel's benchmark shapes, {n} messages, {THREADS} senders/receivers; \
         ns/message, median of {} ±spread ((max-min)/median); load {}",
        repeats(),
        load.split(' ').next().unwrap_or("?")
    );
    let go1 = go_rows(1, n);
    let go2 = go_rows(2, n);
    if go1.is_none() {
        println!("  Go: SKIPPED (no `go` on PATH, or go/channels.go failed)");
    }
    let head = [
        "fib-fibers",
        "fib-thread",
        "crossbeam",
        "kanal",
        "flume",
        "std mpsc",
        "Go P=1",
    ];
    line(
        22,
        "row",
        &[&head[..], &["Go P=2", "fib/Go1", "thr/cb", "thr/best"]].concat(),
    );
    let flavors: [(&str, &str, Option<usize>); 4] = [
        ("bounded0", "bounded0", Some(0)),
        ("bounded1", "bounded1", Some(1)),
        ("boundedN", "boundedN", Some(n)),
        ("unbounded", "boundedN", None),
    ];
    // CHANNELS_ONLY=bounded0,bounded1 runs only those flavors' rows, and
    // CHANNELS_SHAPES=spsc,mpsc only those shapes.
    let only = std::env::var("CHANNELS_ONLY").unwrap_or_default();
    let shapes = std::env::var("CHANNELS_SHAPES").unwrap_or_default();
    // CHANNELS_IMPS=fib-thread,crossbeam runs only those columns (a
    // closer look at one ratio: the others' runs do not heat the machine
    // between its turns).
    let imps_only = std::env::var("CHANNELS_IMPS").unwrap_or_default();
    let picked = |name: &str| imps_only.is_empty() || imps_only.split(',').any(|i| i == name);
    for (flavor, go_flavor, cap) in flavors {
        if !only.is_empty() && !only.split(',').any(|o| o == flavor) {
            continue;
        }
        for shape in SHAPES {
            if !shapes.is_empty() && !shapes.split(',').any(|s| s == shape) {
                continue;
            }
            if shape == "seq" && cap.is_some_and(|c| c < n) {
                continue; // one task alone would wait forever
            }
            let all: [&dyn Fn() -> Option<f64>; 6] = [
                &|| sel::<Fibra>(On::Fibers, shape, cap, n),
                &|| sel::<Fibra>(On::Threads, shape, cap, n),
                &|| sel::<Crossbeam>(On::Threads, shape, cap, n),
                &|| multi::<Kanal>(On::Threads, shape, cap, n),
                &|| multi::<Flume>(On::Threads, shape, cap, n),
                &|| single::<Std>(On::Threads, shape, cap, n),
            ];
            let skip = || -> Option<f64> { None };
            let imps: Vec<&dyn Fn() -> Option<f64>> = (0..all.len())
                .map(|i| {
                    if picked(head[i]) {
                        all[i]
                    } else {
                        &skip as &dyn Fn() -> Option<f64>
                    }
                })
                .collect();
            let t = rounds(&imps);
            let go_name = format!("{go_flavor}_{shape}");
            let (g1, g2) = (go_find(&go1, &go_name), go_find(&go2, &go_name));
            let star = if cap.is_none() { "*" } else { "" };
            let mut cols: Vec<String> = t.iter().map(cell).collect();
            cols.extend([cell(&g1) + star, cell(&g2) + star]);
            // The faster of crossbeam and kanal (kanal has no select rows).
            let best = match (&t[2], &t[3]) {
                (Some(c), Some(k)) if median(k) < median(c) => &t[3],
                (None, Some(_)) => &t[3],
                _ => &t[2],
            };
            cols.extend([ratio(&t[0], &g1), ratio(&t[1], &t[2]), ratio(&t[1], best)]);
            line(22, &format!("{flavor}_{shape}"), &cols);
        }
    }
    println!("  * Go has no unbounded channel: its column there is a buffer of N (boundedN).");

    println!(
        "\nChannel ping-pong between two fibers of one thread (Go: two goroutines, GOMAXPROCS=1): \
         ns/round trip, median of {} ±spread",
        repeats()
    );
    let imps: [&dyn Fn() -> Option<f64>; 3] = [
        &|| Some(fibra_ping_pong(0)),
        &|| Some(fibra_ping_pong(1)),
        &|| Some(fibra_sync_ping_pong()),
    ];
    let t = rounds(&imps);
    let g0 = go_find(&go1, "bounded0_pingpong");
    let g1 = go_find(&go1, "bounded1_pingpong");
    line(44, "", &["fibra", "Go P=1", "fib/Go1"]);
    for (name, fib, go) in [
        ("fibra::channel bounded(0) / unbuffered", &t[0], &g0),
        ("fibra::channel bounded(1) / buffered(1)", &t[1], &g1),
        ("fibra::sync::mpsc (unbounded) / buffered(1)", &t[2], &g1),
    ] {
        line(44, name, &[cell(fib), cell(go), ratio(fib, go)]);
    }
}
