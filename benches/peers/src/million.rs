//! A million fresh fibers, each parked in a one-second sleep, against what
//! the kernel charges for the one thing each of them must have: a fresh
//! page of its own stack.
//!
//! The reference maps the same address space fibra's stacks take (one
//! 256 KiB slot per fiber, reserved, not committed) and writes one byte at
//! the top of each slot, where a fiber's first frames go: one page fault,
//! one zeroed page and its share of page tables per fiber, and nothing
//! else. Both run in a fresh child process each time (alternated, so the
//! host's drift hits both alike), which prints its time and the resident
//! memory it added per fiber.

use std::process::Command;
use std::time::{Duration, Instant};

const FIBERS: usize = 1_000_000;
const RUNS: usize = 5;
/// fibra's default stack size: each reference slot spans one stack.
const SLOT: usize = 256 * 1024;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// The child's half: `million-child fibra|pages N`. Prints
/// "seconds bytes-per-fiber" and exits.
pub fn child(kind: &str, n: usize) {
    let (secs, bytes) = match kind {
        "fibra" => fibra_spawn(n),
        "pages" => touch_pages(n),
        _ => panic!("million-child: fibra or pages"),
    };
    println!("{secs} {bytes}");
}

/// Spawns `n` fibers that each sleep one second, and runs each until it
/// parks: the time from the first spawn until all are parked.
fn fibra_spawn(n: usize) -> (f64, f64) {
    let mut out = (0.0, 0.0);
    fibra::run(|| {
        let before = rss_bytes();
        let t = Instant::now();
        for _ in 0..n {
            fibra::spawn(|| fibra::sleep(Duration::from_secs(1)));
        }
        // The root goes behind every new fiber: each starts and parks.
        fibra::yield_now();
        let secs = t.elapsed().as_secs_f64();
        let bytes = rss_bytes().saturating_sub(before) as f64 / n as f64;
        out = (secs, bytes);
        // Leave without waiting for the sleepers or unwinding a million
        // stacks: the figure is taken.
        println!("{} {}", out.0, out.1);
        std::process::exit(0);
    });
    out
}

/// Writes one byte at the top of each of `n` fresh 256 KiB slots.
fn touch_pages(n: usize) -> (f64, f64) {
    let len = n * SLOT;
    // SAFETY: a fresh private anonymous mapping, reserved without swap
    // accounting, as fibra maps its stacks; nothing else uses it.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED, "mmap of {len} bytes");
    let base = base.cast::<u8>();
    let before = rss_bytes();
    let t = Instant::now();
    for i in 0..n {
        // SAFETY: inside the mapping: the last 64 bytes of slot i.
        unsafe { base.add((i + 1) * SLOT - 64).write_volatile(1) };
    }
    let secs = t.elapsed().as_secs_f64();
    let bytes = rss_bytes().saturating_sub(before) as f64 / n as f64;
    (secs, bytes)
}

fn run_child(kind: &str) -> (f64, f64) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["million-child", kind, &FIBERS.to_string()])
        .output()
        .expect("million child");
    assert!(out.status.success(), "million child {kind}: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut it = text.split_whitespace().map(|w| w.parse::<f64>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

fn median_and_spread(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

pub fn run() {
    let (mut fibra, mut pages) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        fibra.push(run_child("fibra"));
        pages.push(run_child("pages"));
    }
    let ratios: Vec<f64> = fibra.iter().zip(&pages).map(|(f, p)| f.0 / p.0).collect();
    let (ft, ft0, ft1) = median_and_spread(fibra.iter().map(|x| x.0).collect());
    let (pt, pt0, pt1) = median_and_spread(pages.iter().map(|x| x.0).collect());
    let (r, r0, r1) = median_and_spread(ratios);
    let (fb, _, _) = median_and_spread(fibra.iter().map(|x| x.1).collect());
    let (pb, _, _) = median_and_spread(pages.iter().map(|x| x.1).collect());
    println!(
        "\n{FIBERS} fresh fibers, each parked in a 1 s sleep, against one fresh page touched \
         per 256 KiB slot (fresh process each, alternated; medians of {RUNS}, min-max)"
    );
    println!("  {:<34} {:>18} {:>14}", "", "seconds", "bytes/fiber");
    println!(
        "  {:<34} {:>7.2} ({:.2}-{:.2}) {:>14.0}",
        "fibra spawn + start + park", ft, ft0, ft1, fb
    );
    println!(
        "  {:<34} {:>7.2} ({:.2}-{:.2}) {:>14.0}",
        "one fresh page per slot", pt, pt0, pt1, pb
    );
    println!("  ratio fibra / pages, per pair: {r:.2}x ({r0:.2}-{r1:.2})");
}
