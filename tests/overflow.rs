//! Stack overflows are reported, never silent. Each case runs in a child
//! process (the report aborts it).

mod util;

use std::hint::black_box;
use std::os::unix::process::ExitStatusExt;

use util::{is_child, run_child};

fn recurse(depth: u64) -> u64 {
    let buf = black_box([depth as u8; 512]);
    if black_box(depth) == u64::MAX {
        return 0;
    }
    recurse(depth + 1) + buf[7] as u64
}

#[test]
fn a_fiber_overflow_is_reported_with_its_name_id_and_size() {
    named_overflow_is_reported("a_fiber_overflow_is_reported_with_its_name_id_and_size", 0);
}

#[test]
fn a_fiber_started_behind_a_long_queue_overflows_with_its_name_in_the_report() {
    // Behind 300 queued fibers, its stack header is written by the switch
    // that first runs it, not by the spawn.
    named_overflow_is_reported(
        "a_fiber_started_behind_a_long_queue_overflows_with_its_name_in_the_report",
        300,
    );
}

/// Runs, in a child, a fiber named `deep-diver` on a 64 KiB stack that
/// recurses until it overflows, spawned behind `queued` fibers, and checks
/// the report.
fn named_overflow_is_reported(test: &str, queued: usize) {
    if is_child(test) {
        fibra::run(|| {
            for _ in 0..queued {
                fibra::spawn(fibra::yield_now);
            }
            let h = fibra::Builder::new()
                .name("deep-diver".into())
                .stack_size(64 * 1024)
                .spawn(|| recurse(0))
                .unwrap();
            eprintln!("fiber id {}", h.fiber().id());
            let _ = h.join();
        });
        unreachable!("the overflow did not abort");
    }
    let out = run_child(test);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let id = stderr
        .lines()
        .find_map(|l| l.strip_prefix("fiber id "))
        .expect("child printed no id");
    let expected = format!("fiber 'deep-diver' (id {id}) has overflowed its stack of 64 KiB");
    assert!(stderr.contains(&expected), "stderr:\n{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{:?}", out.status);
}

#[test]
fn an_unnamed_fiber_overflow_is_reported() {
    if is_child("an_unnamed_fiber_overflow_is_reported") {
        fibra::run(|| fibra::spawn(|| recurse(0)).join().ok());
        unreachable!();
    }
    let out = run_child("an_unnamed_fiber_overflow_is_reported");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fiber '<unnamed>' (id ")
            && stderr.contains("has overflowed its stack of 256 KiB"),
        "stderr:\n{stderr}"
    );
    assert_eq!(out.status.signal(), Some(libc::SIGABRT));
}

#[test]
fn a_thread_overflow_still_gets_rusts_own_report() {
    if is_child("a_thread_overflow_still_gets_rusts_own_report") {
        // Install fibra's handler first, then overflow a plain thread.
        fibra::run(|| fibra::spawn(|| ()).join().unwrap());
        std::thread::Builder::new()
            .name("plain-thread".into())
            .stack_size(128 * 1024)
            .spawn(|| recurse(0))
            .unwrap()
            .join()
            .ok();
        unreachable!();
    }
    let out = run_child("a_thread_overflow_still_gets_rusts_own_report");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("thread 'plain-thread'") && stderr.contains("overflowed its stack"),
        "stderr:\n{stderr}"
    );
    assert!(!out.status.success());
}

#[test]
fn a_null_pointer_in_a_fiber_is_a_plain_segfault_not_an_overflow_report() {
    if is_child("a_null_pointer_in_a_fiber_is_a_plain_segfault_not_an_overflow_report") {
        fibra::run(|| {
            fibra::spawn(|| {
                let p: *const u8 = black_box(std::ptr::null());
                // SAFETY: deliberately invalid, to check the fault is passed on.
                black_box(unsafe { std::ptr::read_volatile(p) })
            })
            .join()
            .ok()
        });
        unreachable!();
    }
    let out = run_child("a_null_pointer_in_a_fiber_is_a_plain_segfault_not_an_overflow_report");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("overflowed"), "stderr:\n{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{:?}", out.status);
}

/// Recurses `depth` frames of a few words each, then runs `at_bottom`
/// (which switches) with the stack nearly full.
/// Frames are kept small (a return address and a saved register or two)
/// so that the depths step through the few bytes a switch pushes.
#[inline(never)]
fn dive(depth: u32, at_bottom: &mut dyn FnMut()) -> u32 {
    if black_box(depth) == 0 {
        at_bottom();
        return 1;
    }
    dive(depth - 1, at_bottom) + black_box(1)
}

/// How a scan child ended.
#[derive(Debug, PartialEq)]
enum Ending {
    Fine,
    Reported,
    Silent(String),
}

/// Runs the scan child: a 16 KiB fiber named 'scan' dives `depth` frames,
/// then switches away: by parking (`fiber`) or by resuming a generator
/// (`generator`).
fn scan_child(kind: &str, depth: u32) -> Ending {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "overflow_during_a_switch_is_reported_at_every_depth",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            "FIBRA_CHILD",
            "overflow_during_a_switch_is_reported_at_every_depth",
        )
        .env("FIBRA_SCAN", format!("{kind} {depth}"))
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        Ending::Fine
    } else if stderr.contains("fiber 'scan' (id ")
        && stderr.contains("has overflowed its stack of 16 KiB")
    {
        Ending::Reported
    } else {
        Ending::Silent(format!("{:?}: {stderr}", out.status))
    }
}

/// An overflow in the push of a switch, on the stack being left, is reported
/// like any other: a fiber's switch and a generator's resume read the
/// lowest byte they will push on the stack they leave before they record
/// the stack they go to, so the overflow faults while the stack left is
/// still the one recorded. Every depth around the first one that overflows
/// must end either fine or with the fiber's report, never in a bare
/// SIGSEGV. (The window is a few bytes wide: CI runs this test in release
/// too, where frames are smallest.)
#[test]
fn overflow_during_a_switch_is_reported_at_every_depth() {
    if is_child("overflow_during_a_switch_is_reported_at_every_depth") {
        let scan = std::env::var("FIBRA_SCAN").unwrap();
        let (kind, depth) = scan.split_once(' ').unwrap();
        let depth: u32 = depth.parse().unwrap();
        let generator = kind == "generator";
        fibra::run(move || {
            fibra::Builder::new()
                .name("scan".into())
                .stack_size(16 * 1024)
                .spawn(move || {
                    let _other = fibra::spawn(|| ());
                    let mut g = fibra::Generator::with_stack_size(64 * 1024, |y| {
                        loop {
                            y.yield_(());
                        }
                    })
                    .unwrap();
                    dive(depth, &mut || {
                        if generator {
                            g.next();
                        } else {
                            // Another fiber is ready, so this switches.
                            fibra::yield_now();
                        }
                    })
                })
                .unwrap()
                .join()
                .unwrap();
        });
        return;
    }
    for kind in ["fiber", "generator"] {
        // The first depth that does not end fine, by bisection.
        let (mut fine, mut not_fine) = (0u32, 4096u32);
        assert_eq!(scan_child(kind, fine), Ending::Fine, "{kind}");
        assert_ne!(scan_child(kind, not_fine), Ending::Fine, "{kind}");
        while not_fine - fine > 1 {
            let mid = (fine + not_fine) / 2;
            match scan_child(kind, mid) {
                Ending::Fine => fine = mid,
                _ => not_fine = mid,
            }
        }
        for depth in not_fine.saturating_sub(12)..not_fine + 12 {
            if let Ending::Silent(what) = scan_child(kind, depth) {
                panic!(
                    "{kind}: depth {depth} (first overflow at {not_fine}) died silently: {what}"
                );
            }
        }
    }
}

/// A fiber that parks inside a generator's body (another fiber runs in
/// between) still runs on the generator's stack when it resumes: an
/// overflow there is reported with the generator stack's size, not taken
/// for a stray fault.
#[test]
fn a_generator_overflow_after_its_fiber_parked_is_reported() {
    if is_child("a_generator_overflow_after_its_fiber_parked_is_reported") {
        fibra::run(|| {
            let other = fibra::spawn(|| {
                // Runs while the host is parked inside the generator, on
                // its own stack, deep enough to fault on a wrong guard.
                black_box(dive(200, &mut || ()));
            });
            let host = fibra::Builder::new()
                .name("host".into())
                .stack_size(256 * 1024)
                .spawn(|| {
                    let mut g = fibra::Generator::with_stack_size(48 * 1024, |y| {
                        fibra::sleep(std::time::Duration::from_millis(20));
                        recurse(0);
                        y.yield_(());
                    })
                    .unwrap();
                    g.next();
                })
                .unwrap();
            other.join().unwrap();
            let _ = host.join();
        });
        unreachable!("the overflow did not abort");
    }
    let out = run_child("a_generator_overflow_after_its_fiber_parked_is_reported");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("has overflowed its stack of 48 KiB"),
        "stderr:\n{stderr}"
    );
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{:?}", out.status);
}
