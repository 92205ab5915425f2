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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long each of fibra's fibers sleeps, in seconds.
static SLEEP_SECS: AtomicU64 = AtomicU64::new(1);

const FIBERS: usize = 1_000_000;
const RUNS: usize = 5;
/// fibra's default stack size: each reference slot spans one stack.
const SLOT: usize = 256 * 1024;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// The child's half: `million-child fibra|pages|guarded|populated N`. Prints
/// "seconds bytes-per-fiber" and exits.
pub fn child(kind: &str, n: usize) {
    let (secs, bytes) = match kind {
        "fibra" => fibra_spawn(n),
        "pages" => touch_pages(n, false),
        "guarded" => touch_pages(n, true),
        "populated" => {
            POPULATE.store(1, Ordering::Relaxed);
            touch_pages(n, true)
        }
        _ => panic!("million-child: fibra, pages, guarded or populated"),
    };
    println!("{secs} {bytes}");
}

/// Spawns `n` fibers that each sleep one second, and runs each until it
/// parks: the time from the first spawn until all are parked.
fn fibra_spawn(n: usize) -> (f64, f64) {
    let mut out = (0.0, 0.0);
    // `NO_WATCHDOG=1`: a runtime without the stall warning, so without the
    // watchdog thread (a process of one thread, as the reference's).
    let rt = if std::env::var_os("NO_WATCHDOG").is_some_and(|v| v == "1") {
        fibra::Runtime::builder().stall_warning(Duration::MAX)
    } else {
        fibra::Runtime::builder()
    }
    .build()
    .expect("runtime");
    rt.block_on(|| {
        // `SLEEP_SECS`: how long each fiber sleeps (1 s unless set). A
        // burst that takes longer than the sleep also wakes and ends its
        // first fibers before it is over. (Read from a static, so that
        // the closure stays empty: a capture would grow each fiber's
        // deferred start.)
        SLEEP_SECS.store(
            std::env::var("SLEEP_SECS").map_or(1, |s| s.parse().expect("SLEEP_SECS")),
            Ordering::Relaxed,
        );
        let before = rss_bytes();
        let t = Instant::now();
        for _ in 0..n {
            fibra::spawn(|| fibra::sleep(Duration::from_secs(SLEEP_SECS.load(Ordering::Relaxed))));
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

/// `MADV_GUARD_INSTALL` (Linux 6.13): a guard page with no mapping of its
/// own, as fibra installs one below each stack.
const MADV_GUARD_INSTALL: libc::c_int = 102;
/// Slots guarded per `process_madvise` call: a chunk of fibra's stacks
/// once a thread has mapped many (its first chunks are smaller).
const CHUNK: usize = 512;

/// `MADV_POPULATE_WRITE` (Linux 5.14; in `process_madvise` since 6.13).
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// Set by the `populated` kind: each chunk's top pages are faulted in by
/// one `process_madvise` before the loop writes them, as fibra does for
/// the chunks of a burst.
static POPULATE: AtomicU64 = AtomicU64::new(0);

/// Installs a guard page at the base of each of the `CHUNK` slots from
/// `first` on, as fibra does for each chunk of stacks it maps.
fn guard_chunk(pidfd: libc::c_int, base: *mut u8, first: usize) {
    advise_chunk(pidfd, base, first, 0, MADV_GUARD_INSTALL);
}

/// Faults in the top page of each of the `CHUNK` slots from `first` on.
fn populate_chunk(pidfd: libc::c_int, base: *mut u8, first: usize) {
    advise_chunk(pidfd, base, first, SLOT - 4096, MADV_POPULATE_WRITE);
}

/// `advice` for the page at `offset` in each of the `CHUNK` slots from
/// `first` on, in one `process_madvise` on our own pidfd.
fn advise_chunk(
    pidfd: libc::c_int,
    base: *mut u8,
    first: usize,
    offset: usize,
    advice: libc::c_int,
) {
    let iov: Vec<libc::iovec> = (first..first + CHUNK)
        .map(|i| libc::iovec {
            iov_base: base.wrapping_add(i * SLOT + offset).cast(),
            iov_len: 4096,
        })
        .collect();
    // SAFETY: process_madvise reads `iov` (valid, CHUNK entries) and
    // advises ranges inside our own mapping.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            pidfd,
            iov.as_ptr(),
            iov.len(),
            advice,
            0,
        )
    };
    assert!(
        rc >= 0,
        "process_madvise({advice}): {}",
        std::io::Error::last_os_error()
    );
}

/// Writes one byte at the top of each of `n` fresh 256 KiB slots (and,
/// `guarded`, first installs a guard page at the base of each, a chunk of
/// 32 at a time).
fn touch_pages(n: usize, guarded: bool) -> (f64, f64) {
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
    // SAFETY: pidfd_open of our own pid; checked below.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, std::process::id(), 0) } as i32;
    assert!(!guarded || pidfd >= 0, "pidfd_open");
    // `SECOND_THREAD=1`: a thread that only sleeps, as fibra's watchdog
    // does, so that the reference's faults are those of a process of two
    // threads too (measured on the Zen 4 host of 2026-11-26: 2.48-2.52 s
    // against 2.25-2.60 s alone, three alternated runs each).
    if std::env::var_os("SECOND_THREAD").is_some_and(|v| v == "1") {
        std::thread::spawn(|| {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        });
    }
    let before = rss_bytes();
    let t = Instant::now();
    for i in 0..n {
        if guarded && i % CHUNK == 0 && i + CHUNK <= n {
            guard_chunk(pidfd, base, i);
            if POPULATE.load(Ordering::Relaxed) == 1 {
                populate_chunk(pidfd, base, i);
            }
        }
        // SAFETY: inside the mapping: the last 64 bytes of slot i.
        unsafe { base.add((i + 1) * SLOT - 64).write_volatile(1) };
    }
    let secs = t.elapsed().as_secs_f64();
    let bytes = rss_bytes().saturating_sub(before) as f64 / n as f64;
    (secs, bytes)
}

/// Runs a fresh child of `kind` (see [`child`]) and returns its seconds
/// and bytes per fiber.
///
/// Right before it, a throwaway child faults and frees more memory than
/// either measured kind takes. This VM's host backs guest memory lazily:
/// a child whose pages the host must back first pays up to 3x for its
/// faults, depending on what ran before it (a build, the other kind), and
/// the figures swung from 1.4 to 4.9 s. After the warm-up every child
/// starts from the same state and pays the guest kernel's own charge for
/// a fresh page (spread under 3%).
pub(crate) fn run_child(kind: &str) -> (f64, f64) {
    let warm = Command::new(std::env::current_exe().unwrap())
        .args(["million-child", "pages", &(FIBERS * 13 / 10).to_string()])
        .output()
        .expect("million warm-up child");
    assert!(warm.status.success(), "million warm-up child: {warm:?}");
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
    let (mut fibra, mut pages, mut guarded) = (Vec::new(), Vec::new(), Vec::new());
    // Each round starts with another of the three: a process that maps and
    // faults gigabytes right after another freed as much pays differently
    // on a VM (up to 2x here), so no kind may always run in the same place.
    for round in 0..RUNS {
        for turn in 0..3 {
            match (round + turn) % 3 {
                0 => fibra.push(run_child("fibra")),
                1 => pages.push(run_child("pages")),
                _ => guarded.push(run_child("guarded")),
            }
        }
    }
    println!(
        "\n{FIBERS} fresh fibers, each parked in a 1 s sleep, against one fresh page touched \
         per 256 KiB slot, and the same with a guard page installed per slot as fibra does \
         (fresh process each, the order rotated each round; medians of {RUNS}, min-max)"
    );
    println!(
        "  {:<34} {:>18} {:>12} {:>22}",
        "", "seconds", "bytes/fiber", "fibra / this, per pair"
    );
    for (name, runs) in [
        ("fibra spawn + start + park", &fibra),
        ("one fresh page per slot", &pages),
        ("  same, plus a guard page per slot", &guarded),
    ] {
        let (t, t0, t1) = median_and_spread(runs.iter().map(|x| x.0).collect());
        let (b, _, _) = median_and_spread(runs.iter().map(|x| x.1).collect());
        let ratios: Vec<f64> = fibra
            .iter()
            .zip(runs.iter())
            .map(|(f, p)| f.0 / p.0)
            .collect();
        let (r, r0, r1) = median_and_spread(ratios);
        println!(
            "  {:<34} {:>7.2} ({:.2}-{:.2}) {:>12.0} {:>9.2}x ({:.2}-{:.2})",
            name, t, t0, t1, b, r, r0, r1
        );
    }
}
