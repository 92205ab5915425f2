//! The stall watchdog, dumps of a stalled worker, and panics that name
//! their fiber (issue 18).

mod util;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};
use util::{is_child, run_child};

/// An event of target `fibra::stall`, as the test subscriber saw it.
#[derive(Clone, Debug)]
struct Seen {
    at: Instant,
    level: tracing::Level,
    fields: String,
}

static SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());

/// A subscriber written for these tests: keeps every `fibra::stall` event,
/// from whatever thread (the watchdog's too: it is the global default).
struct Capture;

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={:?} ", field.name(), value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push_str(&format!("{}={} ", field.name(), value));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "fibra::stall"
    }
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::WARN)
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = String::new();
        event.record(&mut Fields(&mut fields));
        SEEN.lock().unwrap().push(Seen {
            at: Instant::now(),
            level: *event.metadata().level(),
            fields,
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn capture() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| tracing::subscriber::set_global_default(Capture).unwrap());
}

/// The events about the fiber named `name`.
fn seen_for(name: &str) -> Vec<Seen> {
    let key = format!("name={name} ");
    SEEN.lock()
        .unwrap()
        .iter()
        .filter(|s| s.fields.contains(&key))
        .cloned()
        .collect()
}

/// The events about `name` once there are at least `n` of them, or after
/// 10 s. The end of a stall may be told by the watchdog's thread, which
/// can take the report just before the runtime's own last look and emit
/// it a moment after `fibra::run` has returned.
fn seen_at_least(name: &str, n: usize) -> Vec<Seen> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = seen_for(name);
        if seen.len() >= n || Instant::now() >= deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Blocks the thread for `d`, as a crate's blocking call would: by the
/// system call itself, which the `hook` feature (with which this suite
/// also runs, and which makes `std::thread::sleep` park the fiber) does
/// not intercept. Resumed with the time left when a signal ends it early
/// (`EINTR`), as std's sleep does: the watchdog's stack sample is one.
fn block_thread(d: Duration) {
    let mut ts = libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    };
    loop {
        let mut left = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid timespecs to read and to write.
        let rc = unsafe { libc::syscall(libc::SYS_nanosleep, &ts, &mut left) };
        if rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
        ts = left;
    }
}

fn spin(d: Duration) {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < d {
        n = std::hint::black_box(n + 1);
    }
}

#[test]
fn a_thread_sleep_and_a_spin_are_reported_while_they_run() {
    capture();
    let (sleeper_end, spinner_end) = fibra::run(|| {
        let sleeper = fibra::Builder::new()
            .name("t1-sleeper".into())
            .spawn(|| {
                block_thread(Duration::from_millis(600));
                Instant::now()
            })
            .unwrap();
        let spinner = fibra::Builder::new()
            .name("t1-spinner".into())
            .spawn(|| {
                spin(Duration::from_secs(1));
                Instant::now()
            })
            .unwrap();
        (sleeper.join().unwrap(), spinner.join().unwrap())
    });
    for (name, end) in [("t1-sleeper", sleeper_end), ("t1-spinner", spinner_end)] {
        let seen = seen_at_least(name, 2);
        assert!(seen.len() >= 2, "{name}: {seen:?}");
        assert!(seen.iter().all(|s| s.level == tracing::Level::WARN));
        // The first while it ran, with where it was spawned.
        assert!(
            seen[0].at < end,
            "{name}: warned only after it ended: {seen:?}"
        );
        assert!(seen[0].fields.contains("stall.rs"), "{seen:?}");
        assert!(seen[0].fields.contains("running_for="), "{seen:?}");
        // The second when it parked (or ended), with the total.
        assert!(seen[1].fields.contains("in all"), "{seen:?}");
    }
}

/// The watchdog sleeps while every runtime waits in `epoll_wait`; a
/// runtime that runs again wakes it, so a stall after an idle spell is
/// still named while it runs.
#[test]
fn a_stall_after_an_idle_spell_is_reported_while_it_runs() {
    capture();
    let end = fibra::run(|| {
        fibra::Builder::new()
            .name("t6-late".into())
            .spawn(|| {
                fibra::sleep(Duration::from_millis(300)); // all idle: the watchdog sleeps
                block_thread(Duration::from_millis(500));
                Instant::now()
            })
            .unwrap()
            .join()
            .unwrap()
    });
    let seen = seen_at_least("t6-late", 2);
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(seen[0].at < end, "warned only after it ended: {seen:?}");
    assert!(seen[1].fields.contains("in all"), "{seen:?}");
}

#[test]
fn no_warning_when_it_is_off() {
    capture();
    let rt = fibra::Runtime::builder()
        .stall_warning(Duration::MAX)
        .build()
        .unwrap();
    rt.block_on(|| {
        fibra::Builder::new()
            .name("t2-quiet".into())
            .spawn(|| block_thread(Duration::from_millis(400)))
            .unwrap()
            .join()
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(seen_for("t2-quiet").is_empty());
}

/// A std channel waited on by a fiber whose sender is a fiber of the same
/// thread: the sender cannot run, so the receiver would wait forever (here
/// bounded by a timeout). The watchdog names the receiver while it waits.
#[test]
fn a_std_channel_waited_on_in_a_fiber_is_named() {
    capture();
    let got = fibra::run(|| {
        let (tx, rx) = std::sync::mpsc::channel::<u32>();
        let receiver = fibra::Builder::new()
            .name("t3-receiver".into())
            .spawn(move || rx.recv_timeout(Duration::from_millis(800)).ok())
            .unwrap();
        fibra::spawn(move || {
            fibra::sleep(Duration::from_millis(1));
            let _ = tx.send(7);
        });
        receiver.join().unwrap()
    });
    assert_eq!(
        got, None,
        "the sender could not run while the receiver blocked"
    );
    let seen = seen_for("t3-receiver");
    assert!(!seen.is_empty(), "not named: {:?}", SEEN.lock().unwrap());
}

#[test]
fn a_dump_names_the_fiber_that_holds_a_worker() {
    let rt = fibra::Runtime::builder().workers(2).build().unwrap();
    let started = std::sync::Arc::new(AtomicUsize::new(0));
    let s = started.clone();
    let h = rt.spawn_on(0, move || {
        fibra::Builder::new()
            .name("t4-spin".into())
            .spawn(move || {
                s.store(1, Ordering::SeqCst);
                spin(Duration::from_secs(1));
            })
            .unwrap()
            .join()
            .unwrap();
    });
    while started.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    let dump = rt.dump();
    let spinning = dump
        .fibers()
        .find(|f| f.name.as_deref() == Some("t4-spin"))
        .unwrap_or_else(|| panic!("not listed:\n{dump}"));
    assert_eq!(
        spinning.state,
        fibra::runtime::FiberState::Running,
        "{dump}"
    );
    let running_for = spinning.running_for.expect("running_for");
    assert!(running_for >= Duration::from_millis(50), "{dump}");
    assert!(spinning.spawned_at.unwrap().file().ends_with("stall.rs"));
    assert!(dump.to_string().contains("t4-spin"), "{dump}");
    rt.block_on(|| h.join().unwrap());
    // Once it parks, the worker answers in full, with stack use and places.
    let h = rt.spawn_on(0, || fibra::sleep(Duration::from_secs(30)));
    std::thread::sleep(Duration::from_millis(50));
    let dump = rt.dump();
    assert!(dump.is_complete(), "{dump}");
    let parked = dump.fibers().find(|f| f.stack_used.is_some()).unwrap();
    assert!(
        parked.stack_used.unwrap() > 0 && parked.spawned_at.is_some(),
        "{dump}"
    );
    h.cancel();
}

#[test]
fn the_panic_report_of_a_fiber_names_it() {
    if is_child("the_panic_report_of_a_fiber_names_it") {
        fibra::run(|| {
            let _ = fibra::Builder::new()
                .name("t5-exploder".into())
                .spawn(|| panic!("boom"))
                .unwrap()
                .join();
        });
        println!("CHILD OK");
        return;
    }
    let out = run_child("the_panic_report_of_a_fiber_names_it");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("fiber 't5-exploder' (#"), "{stderr}");
    assert!(stderr.contains("boom"), "{stderr}");
}

#[test]
fn join_errors_name_their_fiber() {
    fibra::run(|| {
        let h = fibra::Builder::new()
            .name("worker-3".into())
            .spawn(|| panic!("boom"))
            .unwrap();
        let id = h.fiber().id();
        let e = h.join().unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "fiber 'worker-3' ({}) panicked: boom",
                format_args!("#{id}")
            )
        );
        let h = fibra::spawn(|| panic!("boom"));
        let id = h.fiber().id();
        assert_eq!(
            h.join().unwrap_err().to_string(),
            format!("fiber #{id} panicked: boom")
        );
        let h = fibra::Builder::new()
            .name("w".into())
            .spawn(|| fibra::sleep(Duration::from_secs(60)))
            .unwrap();
        fibra::yield_now();
        h.cancel();
        let id = h.fiber().id();
        assert_eq!(
            h.join().unwrap_err().to_string(),
            format!("fiber 'w' (#{id}) was cancelled")
        );
    });
}

#[test]
fn spawn_outside_a_runtime_points_at_the_callers_line() {
    if is_child("spawn_outside_a_runtime_points_at_the_callers_line") {
        let line = line!() + 1;
        let _ = std::panic::catch_unwind(|| fibra::spawn(|| ()));
        println!("LINE {line}");
        return;
    }
    let out = run_child("spawn_outside_a_runtime_points_at_the_callers_line");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout.split("LINE ").nth(1).unwrap();
    let line = line.split_whitespace().next().unwrap();
    assert!(
        stderr.contains(&format!("tests/stall.rs:{line}:")),
        "{stderr}"
    );
}

#[test]
fn a_fiber_that_joins_itself_is_told_at_its_line() {
    const NAME: &str = "a_fiber_that_joins_itself_is_told_at_its_line";
    if is_child(NAME) {
        use std::cell::RefCell;
        use std::rc::Rc;
        fibra::run(|| {
            let slot: Rc<RefCell<Option<fibra::JoinHandle<()>>>> = Rc::default();
            let s = slot.clone();
            let h = fibra::spawn(move || {
                fibra::yield_now(); // until its handle is in the slot
                let own = s.borrow_mut().take().unwrap();
                println!("LINE {}", line!() + 1);
                own.join().unwrap();
            });
            *slot.borrow_mut() = Some(h);
            fibra::sleep(Duration::from_millis(20));
        });
        return;
    }
    let out = run_child(NAME);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout.split("LINE ").nth(1).expect("no LINE");
    let line = line.split_whitespace().next().unwrap();
    assert!(stderr.contains("joined itself"), "{stderr}");
    assert!(
        stderr.contains(&format!("tests/stall.rs:{line}:")),
        "{stderr}"
    );
}
