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
    if is_child("a_fiber_overflow_is_reported_with_its_name_id_and_size") {
        fibra::run(|| {
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
    let out = run_child("a_fiber_overflow_is_reported_with_its_name_id_and_size");
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
