//! A runtime starved by fibers that take turns (issue 48): none runs
//! `stall_warning` without a switch, yet the runtime does not poll for I/O
//! and timers for that long. The watchdog tells it while it lasts (target
//! `fibra::stall`, naming the fibers that took the time) and when it ends;
//! a dump the runtime answers late says what kept it busy.

mod warnings;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Fibers that each compute 50 ms between yields: the runtime polls every
/// 128 switches, so every 6.4 s, while the warning comes at 200 ms. (50 ms
/// of wall-clock spin, a quarter of the threshold: room for a thread
/// descheduled mid-spin on a loaded machine.)
#[test]
fn a_runtime_starved_by_fibers_taking_turns_is_told_while_it_starves() {
    warnings::capture();
    let rt = fibra::Runtime::builder()
        .workers(1)
        .stall_warning(Duration::from_millis(200))
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let h = rt.spawn(move || {
        let fibers: Vec<_> = (0..4)
            .map(|i| {
                let s = s.clone();
                fibra::Builder::new()
                    .name(format!("starver-{i}"))
                    .spawn(move || {
                        while !s.load(Ordering::Relaxed) {
                            warnings::spin(Duration::from_millis(50));
                            fibra::yield_now();
                        }
                    })
                    .unwrap()
            })
            .collect();
        for f in fibers {
            f.join().unwrap();
        }
    });
    let warned = warnings::wait_for(
        "fibra::stall",
        &["has not polled for I/O and timers", "starver-"],
        Duration::from_secs(60),
    );
    assert!(!warned.is_empty(), "no warning: {:#?}", warnings::all());
    println!("{}", warned[0].fields);
    assert!(warned[0].fields.contains("not_polled_for="), "{warned:?}");
    // Still starving (6.4 s a window): a dump is answered for.
    let dump = rt.dump();
    let text = dump.to_string();
    println!("{text}");
    assert!(!dump.is_complete(), "{text}");
    // What kept it: the fibers taking turns, or (when one starver's 50 ms
    // of CPU took more than the dump's wait in wall-clock time: seen under
    // AddressSanitizer with the suite's other binaries on both cores, at
    // 105 ms) the one starver running as the dump asked.
    assert!(
        text.contains("busy running fibers") || text.contains("held by one fiber"),
        "{text}"
    );
    assert!(text.contains("starver-"), "{text}");
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    let fed = warnings::wait_for(
        "fibra::stall",
        &["polled for I/O and timers again"],
        Duration::from_secs(60),
    );
    assert!(!fed.is_empty(), "{:#?}", warnings::all());
    // None of them computes 200 ms without a switch: none is a stall.
    // (CI saw starvers told as stalls of 252 and 259 ms: the watchdog
    // dated its mark of the word with a clock read at the start of its
    // round, before it spent up to 250 ms naming the stack of the next
    // test's lone spinner; reproduced here without any load, fixed in
    // `scheduler/watchdog.rs`.)
    let stalls = warnings::seen("fibra::stall", &["starver-", "without blocking"]);
    assert!(stalls.is_empty(), "a starver told as a stall: {stalls:#?}");
}

/// One fiber that holds its thread is a stall, told as such, never as
/// starvation.
#[test]
fn one_fiber_holding_its_thread_is_a_stall_not_starvation() {
    warnings::capture();
    fibra::run(|| {
        fibra::Builder::new()
            .name("lone-spinner".into())
            .spawn(|| warnings::spin(Duration::from_millis(600)))
            .unwrap()
            .join()
            .unwrap();
    });
    let stall = warnings::wait_for(
        "fibra::stall",
        &["lone-spinner", "in all"],
        Duration::from_secs(30),
    );
    assert!(!stall.is_empty(), "{:#?}", warnings::all());
    assert!(
        warnings::seen("fibra::stall", &["has not polled", "lone-spinner"]).is_empty(),
        "{:#?}",
        warnings::all()
    );
}
