//! The holes a fourth audit found in fibra's own signals (issue 61), as
//! proofs of concept in our own words: the stall sampler's signal landing
//! on a fiber's nearly full stack, a user's listener taking the sampler's
//! signal, fibra's helper threads taking the process's signals, and
//! signals lost when the dispatcher falls behind. Each runs in a child
//! process: they install process-wide dispositions, and before their fix
//! some ended the process.

mod util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use libc::c_int;

/// The lowest usable address of the stack `addr` is on: just above its
/// guard page, which is a guard region in `/proc/self/pagemap` (bit 58,
/// `MADV_GUARD_INSTALL`, Linux ≥ 6.13) or an inaccessible mapping of its
/// own (`mprotect`, before).
fn stack_floor(addr: usize) -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let inaccessible = |p: usize| {
        maps.lines().any(|line| {
            let mut parts = line.split_whitespace();
            let range = parts.next().unwrap();
            let perms = parts.next().unwrap();
            let (lo, hi) = range.split_once('-').unwrap();
            let (lo, hi) = (
                usize::from_str_radix(lo, 16).unwrap(),
                usize::from_str_radix(hi, 16).unwrap(),
            );
            (lo..hi).contains(&p) && perms.starts_with("---")
        })
    };
    let pagemap = std::fs::File::open("/proc/self/pagemap").unwrap();
    let guard_region = |p: usize| {
        let mut entry = [0u8; 8];
        std::os::unix::fs::FileExt::read_exact_at(&pagemap, &mut entry, (p / page * 8) as u64)
            .unwrap();
        u64::from_ne_bytes(entry) & (1 << 58) != 0
    };
    let mut p = addr / page * page;
    for _ in 0..4096 {
        p -= page;
        if inaccessible(p) || guard_region(p) {
            return p + page;
        }
    }
    panic!("no guard page below {addr:#x}");
}

/// The stack pointer (not a local's address: under AddressSanitizer a
/// local may live on its fake stack, in the heap).
#[inline(always)]
fn sp() -> usize {
    let sp: usize;
    // SAFETY: reads a register, touches no memory.
    unsafe { std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack)) };
    sp
}

/// Descends until fewer than `left` bytes and two of its own frames are
/// left above `floor` (its frame measured between two calls: a sanitizer
/// makes it larger), then says so and spins until `stop`. `above`: the
/// caller's stack pointer.
#[inline(never)]
fn descend(
    floor: usize,
    left: usize,
    above: usize,
    reached: &AtomicBool,
    stop: &AtomicBool,
) -> usize {
    let mut pad = [0u8; 96];
    std::hint::black_box(&mut pad);
    let here = sp();
    let frame = above.saturating_sub(here).clamp(128, 16 * 1024);
    if here - floor > left + 2 * frame {
        return descend(floor, left, here, reached, stop) + usize::from(pad[0]);
    }
    reached.store(true, Ordering::SeqCst);
    while !stop.load(Ordering::Relaxed) {
        std::hint::spin_loop();
    }
    here - floor
}

/// How close to its stack's end the fiber stalls: less than a signal
/// frame. (Under AddressSanitizer its own few calls there take more: the
/// test then checks the samples and the report, not the distance.)
const LEFT: usize = if cfg!(fibra_asan) { 16 * 1024 } else { 1024 };

#[inline(never)]
#[allow(unconditional_recursion)]
fn overflow(n: u64) -> u64 {
    let pad = std::hint::black_box([n; 64]);
    overflow(pad[1] + 1) + pad[0]
}

/// Hole 4: the sampler's signal had no alternate stack, so the kernel put
/// its frame (1.8 KiB here, 3.4 KiB with AVX-512) on the stalled fiber's
/// stack. A fiber stalled 1-1.5 KiB from its stack's end — a depth at which
/// it runs fine — could not take it: the kernel forced a SIGSEGV, and std
/// then reset SIGSEGV to its default, so fibra's overflow report was gone.
/// Here such a fiber is sampled by two dumps and by the stall watchdog,
/// then another fiber overflows: fibra's report must still come.
#[test]
fn a_fiber_stalled_near_its_stack_s_end_is_sampled_and_overflows_are_still_reported() {
    const NAME: &str =
        "a_fiber_stalled_near_its_stack_s_end_is_sampled_and_overflows_are_still_reported";
    if util::is_child(NAME) {
        let rt = fibra::Runtime::builder()
            .workers(1)
            .stall_warning(Duration::from_millis(50))
            .build()
            .unwrap();
        let reached = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let left = Arc::new(AtomicUsize::new(0));
        let (r, s, l) = (reached.clone(), stop.clone(), left.clone());
        let deep = rt.spawn(move || {
            fibra::Builder::new()
                .name("deep".into())
                .stack_size(64 * 1024)
                .spawn(move || {
                    let floor = stack_floor(sp());
                    l.store(descend(floor, LEFT, sp(), &r, &s), Ordering::SeqCst);
                })
                .unwrap()
                .join()
                .unwrap()
        });
        while !reached.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut sampled = 0;
        for _ in 0..2 {
            let dump = rt.dump();
            let deep = dump.fibers().find(|f| f.name.as_deref() == Some("deep"));
            sampled += usize::from(deep.is_some_and(|f| f.stack.is_some()));
        }
        std::thread::sleep(Duration::from_millis(300)); // the watchdog's samples
        stop.store(true, Ordering::SeqCst);
        deep.join().unwrap();
        println!(
            "SAMPLED {sampled} with {} bytes left",
            left.load(Ordering::SeqCst)
        );
        // Now an overflow: fibra's report, then abort.
        let h = rt.spawn(|| {
            fibra::Builder::new()
                .name("overflows".into())
                .stack_size(64 * 1024)
                .spawn(|| overflow(0))
                .unwrap()
                .join()
        });
        let _ = h.join();
        println!("NOT REACHED");
        return;
    }
    let out = util::run_child(NAME);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = format!(
        "status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(stdout.contains("SAMPLED 2 with"), "{report}");
    assert!(
        stderr.contains("fiber 'overflows'") && stderr.contains("has overflowed its stack"),
        "{report}"
    );
    assert!(!stdout.contains("NOT REACHED"), "{report}");
}

/// Hole 5: `Signals::new` accepted the sampler's signal and installed
/// over the sampler: the user then received signals nobody sent, and stall
/// warnings lost their stacks. Now it is refused, with a clear error.
#[test]
fn the_sampler_s_signal_is_refused_with_a_clear_error() {
    let sig = libc::SIGRTMAX() - 3;
    let e = fibra::signal::Signals::new(&[libc::SIGUSR1, sig]).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let text = e.to_string();
    assert!(
        text.contains(&sig.to_string()) && text.contains("fibra"),
        "{text}"
    );
    let e = fibra::signal::wait(&[sig]).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
}

/// The process's signal mask bits of thread `tid` (`SigBlk`).
fn blocked(tid: &str) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigBlk:"))
        .map_or(0, |v| u64::from_str_radix(v.trim(), 16).unwrap())
}

fn sig_bit(sig: c_int) -> u64 {
    1 << (sig - 1)
}

/// Finding 8: fibra's helper threads blocked no signal, so a signal sent
/// to the process — which the program's own threads block, to collect it
/// with `sigtimedwait` — could be delivered to a helper instead (and with
/// its default action, end the process). The helpers here are started by
/// a thread that blocks nothing: the watchdog, the blocking pool and its
/// spawner, the symbol namer of a dump, the signal dispatcher; each must
/// block every signal a program may handle (`SigBlk` in its status).
#[test]
fn fibra_s_helper_threads_block_the_process_s_signals() {
    const NAME: &str = "fibra_s_helper_threads_block_the_process_s_signals";
    if !util::is_child(NAME) {
        util::assert_child_ok(NAME);
        return;
    }
    std::thread::spawn(|| {
        let rt = fibra::Runtime::builder()
            .stall_warning(Duration::from_millis(20))
            .build()
            .unwrap();
        rt.block_on(|| {
            fibra::spawn_blocking(|| ());
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(100) {} // a stall
            let _ = fibra::signal::Signals::new(&[libc::SIGWINCH]).unwrap();
        });
        let _ = rt.dump().to_string();
    })
    .join()
    .unwrap();
    // (A new thread names itself once it runs: wait for the names.)
    let expected = ["fibra-watchdog", "fibra-signal", "fibra-blocking"];
    let start = Instant::now();
    let helpers = loop {
        let mut helpers = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap() {
            let tid = task.unwrap().file_name().into_string().unwrap();
            let name =
                std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).unwrap_or_default();
            if name.starts_with("fibra-") {
                helpers.push((name.trim().to_string(), tid));
            }
        }
        let named = |e: &str| helpers.iter().any(|(n, _)| n.starts_with(e));
        if expected.iter().all(|e| named(e)) || start.elapsed() > Duration::from_secs(5) {
            break helpers;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    for e in expected {
        assert!(
            helpers.iter().any(|(n, _)| n.starts_with(e)),
            "{e} not in {helpers:?}"
        );
    }
    for (name, tid) in &helpers {
        let mask = blocked(tid);
        assert!(
            mask & sig_bit(libc::SIGUSR2) != 0 && mask & sig_bit(libc::SIGINT) != 0,
            "{name} blocks {mask:#x}"
        );
    }
    println!("CHILD OK");
}

/// Suspected, then shown: the handler wrote one byte per signal to a
/// non-blocking pipe and dropped it when the pipe was full, so a burst of
/// one signal could crowd out another one. Three threads raise SIGUSR1 a
/// hundred thousand times between them while nobody waits (and 300 idle
/// listeners of it slow the dispatcher down), each then raises a signal
/// of its own: every number is delivered.
#[test]
fn no_signal_number_is_lost_in_a_burst_of_another() {
    const NAME: &str = "no_signal_number_is_lost_in_a_burst_of_another";
    if !util::is_child(NAME) {
        util::assert_child_ok(NAME);
        return;
    }
    let own = [libc::SIGUSR2, libc::SIGWINCH, libc::SIGURG];
    let mut all = vec![libc::SIGUSR1];
    all.extend(own);
    let mut signals = fibra::signal::Signals::new(&all).unwrap();
    // More listeners of the burst's signal make the dispatcher slower than
    // the raisers: its pipe fills.
    let _more: Vec<_> = (0..300)
        .map(|_| fibra::signal::Signals::new(&[libc::SIGUSR1]).unwrap())
        .collect();
    let raisers: Vec<_> = own
        .into_iter()
        .map(|sig| {
            std::thread::spawn(move || {
                for _ in 0..35_000 {
                    // SAFETY: raising a signal the process handles.
                    unsafe { libc::raise(libc::SIGUSR1) };
                }
                // SAFETY: as above.
                unsafe { libc::raise(sig) };
            })
        })
        .collect();
    raisers.into_iter().for_each(|t| t.join().unwrap());
    let mut seen = Vec::new();
    fibra::run(move || {
        // Each wait returns one kept signal; a missing one leaves the last
        // wait parked: bound the whole by a timeout.
        let got = fibra::timeout(Duration::from_secs(10), || {
            while !all.iter().all(|s| seen.contains(s)) {
                let s = signals.wait().unwrap();
                if !seen.contains(&s) {
                    seen.push(s);
                }
            }
            seen
        });
        assert!(got.is_ok(), "a signal was lost");
    });
    println!("CHILD OK");
}
