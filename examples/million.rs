//! A million fibers asleep at once, each with its own guarded stack.
//!
//! `cargo run --release --example million [N]`
//!
//! Prints the time to spawn them, the resident memory and the memory
//! mappings they cost, and how late they woke. Every stack has a guard
//! page; on Linux >= 6.13 (MADV_GUARD_INSTALL) the stacks still merge into
//! a handful of mappings, far under the default vm.max_map_count of 65530.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count()
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("N must be a number"))
        .unwrap_or(1_000_000);
    fibra::run(|| {
        let rss_before = rss_bytes();
        let maps_before = mappings();
        // The fibers start when the root yields below, and then read the
        // deadline, set once all are spawned.
        let deadline = Rc::new(Cell::new(Instant::now()));
        let lateness = Rc::new(Cell::new(Duration::ZERO));
        let woken = Rc::new(Cell::new(0usize));

        let t = Instant::now();
        for _ in 0..n {
            let (deadline, lateness, woken) = (deadline.clone(), lateness.clone(), woken.clone());
            fibra::spawn(move || {
                let at = deadline.get();
                fibra::sleep_until(at);
                let late = at.elapsed();
                lateness.set(lateness.get().max(late));
                woken.set(woken.get() + 1);
            });
        }
        let spawned_in = t.elapsed();

        deadline.set(Instant::now() + Duration::from_secs(2));
        let t = Instant::now();
        fibra::yield_now(); // every fiber starts and parks in sleep_until
        let started_in = t.elapsed();

        let rss = rss_bytes().saturating_sub(rss_before);
        let maps = mappings();
        println!("fibers:            {n}");
        println!(
            "spawn:             {spawned_in:?} ({:?} per fiber)",
            spawned_in / n as u32
        );
        println!(
            "start and park:    {started_in:?} ({:?} per fiber)",
            started_in / n as u32
        );
        println!(
            "resident memory:   {} MiB, {} bytes per parked fiber",
            rss >> 20,
            rss / n as u64
        );
        println!(
            "memory mappings:   {maps} (before: {maps_before}; vm.max_map_count is 65530 by default)"
        );

        while woken.get() < n {
            fibra::sleep(Duration::from_millis(10));
        }
        println!(
            "all woke; the last one {:?} after the deadline",
            lateness.get()
        );
    });
}
