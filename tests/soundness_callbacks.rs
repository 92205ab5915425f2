//! A `tracing` subscriber's callbacks are user code that fibra calls from
//! inside its scheduler (a fiber span's `enter`, `exit`, `try_close`, its
//! `new_span`, and fibra's trace events). They may spawn, wake and log —
//! and find the runtime consistent — but may neither block nor unwind
//! there: that is refused with a message, never undefined behaviour.
//!
//! Each scenario runs in a child process, where memory corruption shows as
//! a crash (it used to: a subscriber spawning from `exit` made the switch
//! save a stack pointer into a freed slab).

mod util;

use std::fs::File;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use util::is_child;

/// How many fibers a subscriber spawns from one callback: well past the
/// record slab's first growth (64 slots).
const SPAWNS: usize = 300;

/// Runs test `name` of this binary as a child, killed if it outlives
/// `limit` (a hang fails, it does not block the run).
fn run_child(name: &str, limit: Duration) -> Output {
    let dir = std::env::temp_dir();
    let base = format!("fibra-soundness-{}-{name}", std::process::id());
    let out_path = dir.join(format!("{base}.out"));
    let err_path = dir.join(format!("{base}.err"));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("FIBRA_CHILD", name)
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::from(File::create(&out_path).unwrap()))
        .stderr(Stdio::from(File::create(&err_path).unwrap()))
        .spawn()
        .expect("cannot run the test binary as a child");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child {name} still ran after {limit:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = Output {
        status,
        stdout: std::fs::read(&out_path).unwrap_or_default(),
        stderr: std::fs::read(&err_path).unwrap_or_default(),
    };
    let _ = std::fs::remove_file(out_path);
    let _ = std::fs::remove_file(err_path);
    output
}

fn assert_child_ok(name: &str) {
    let out = run_child(name, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("CHILD OK"),
        "status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}

/// Asserts that the child died (aborted) and said `expected` on stderr.
fn assert_child_aborts_saying(name: &str, expected: &[&str]) {
    let out = run_child(name, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && !stdout.contains("CHILD OK"),
        "the child should have aborted: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    for what in expected {
        assert!(
            stderr.contains(what),
            "no {what:?} in the child's stderr:\n{stderr}"
        );
    }
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "an abort, not a crash: {:?}\nstderr:\n{stderr}",
        out.status
    );
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Hook {
    NewSpan,
    Enter,
    Exit,
    TryClose,
    Event,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Act {
    /// Spawns `SPAWNS` fibers, each of which yields once and counts itself.
    Spawn,
    /// Panics.
    Panic,
    /// Blocks: sleeps, which parks a fiber.
    Park,
}

/// Set while the child's runtime runs (its callbacks may spawn then).
static IN_RUNTIME: AtomicBool = AtomicBool::new(false);

/// A subscriber that does `act` from `hook`, once (the first call that
/// comes from a fiber of the runtime, and not from the fibers it spawned:
/// their spans would call it again).
struct Hostile {
    hook: Hook,
    act: Act,
    armed: AtomicUsize,
    next_id: AtomicU64,
    ran: Arc<AtomicUsize>,
}

impl Hostile {
    fn new(hook: Hook, act: Act, ran: Arc<AtomicUsize>) -> Hostile {
        Hostile {
            hook,
            act,
            armed: AtomicUsize::new(1),
            next_id: AtomicU64::new(0),
            ran,
        }
    }

    fn hit(&self, hook: Hook) {
        if hook != self.hook
            || !IN_RUNTIME.load(Ordering::SeqCst)
            || self.armed.swap(0, Ordering::SeqCst) == 0
        {
            return;
        }
        match self.act {
            Act::Spawn => {
                for _ in 0..SPAWNS {
                    let ran = self.ran.clone();
                    // Detached: the test waits for the count.
                    drop(fibra::spawn(move || {
                        fibra::yield_now();
                        ran.fetch_add(1, Ordering::SeqCst);
                    }));
                }
            }
            Act::Panic => panic!("a subscriber that panics in {hook:?}"),
            Act::Park => fibra::sleep(Duration::from_millis(1)),
        }
    }
}

struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Hostile {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        self.hit(Hook::NewSpan);
        Id::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        // The wake-up's event: it used to be emitted in the middle of the
        // wake, under a borrow of the fiber's record.
        let mut message = Message(String::new());
        event.record(&mut message);
        if message.0 == "unpark" {
            self.hit(Hook::Event);
        }
    }
    fn enter(&self, _: &Id) {
        self.hit(Hook::Enter);
    }
    fn exit(&self, _: &Id) {
        self.hit(Hook::Exit);
    }
    fn try_close(&self, _: Id) -> bool {
        self.hit(Hook::TryClose);
        true
    }
}

/// The child's side: a runtime whose fibers switch, park and finish under
/// a `Hostile` subscriber; all `SPAWNS` fibers must run, and the runtime's
/// own fibers must see their own values after every switch.
fn child(hook: Hook, act: Act) {
    let ran = Arc::new(AtomicUsize::new(0));
    let subscriber = Hostile::new(hook, act, ran.clone());
    tracing::subscriber::with_default(subscriber, || {
        fibra::run(|| {
            IN_RUNTIME.store(true, Ordering::SeqCst);
            let workers: Vec<_> = (0..8u64)
                .map(|i| {
                    fibra::spawn(move || {
                        let mut sum = 0;
                        for round in 0..20u64 {
                            let mine = [i, round, i * round];
                            if round % 2 == 0 {
                                fibra::yield_now();
                            } else {
                                fibra::sleep(Duration::from_micros(50));
                            }
                            assert_eq!(mine, [i, round, i * round], "a stack came back wrong");
                            sum += round;
                        }
                        sum
                    })
                })
                .collect();
            for w in workers {
                assert_eq!(w.join().unwrap(), 190);
            }
            let deadline = Instant::now() + Duration::from_secs(20);
            while ran.load(Ordering::SeqCst) < SPAWNS {
                assert!(
                    Instant::now() < deadline,
                    "the spawned fibers did not all run"
                );
                fibra::sleep(Duration::from_millis(1));
            }
            IN_RUNTIME.store(false, Ordering::SeqCst);
        });
    });
    assert_eq!(ran.load(Ordering::SeqCst), SPAWNS);
    println!("CHILD OK");
}

macro_rules! spawning_test {
    ($name:ident, $hook:expr) => {
        #[test]
        fn $name() {
            if is_child(stringify!($name)) {
                return child($hook, Act::Spawn);
            }
            assert_child_ok(stringify!($name));
        }
    };
}

spawning_test!(a_subscriber_spawning_300_fibers_from_exit, Hook::Exit);
spawning_test!(a_subscriber_spawning_300_fibers_from_enter, Hook::Enter);
spawning_test!(
    a_subscriber_spawning_300_fibers_from_new_span,
    Hook::NewSpan
);
spawning_test!(
    a_subscriber_spawning_300_fibers_from_try_close,
    Hook::TryClose
);
spawning_test!(
    a_subscriber_spawning_300_fibers_from_an_unpark_event,
    Hook::Event
);

#[test]
fn a_subscriber_panicking_in_exit_aborts_with_a_message() {
    const NAME: &str = "a_subscriber_panicking_in_exit_aborts_with_a_message";
    if is_child(NAME) {
        return child(Hook::Exit, Act::Panic);
    }
    assert_child_aborts_saying(
        NAME,
        &[
            "a subscriber that panics in Exit",
            "fibra: a tracing subscriber panicked in `Subscriber::exit`",
        ],
    );
}

#[test]
fn a_subscriber_parking_in_exit_is_refused_with_a_message() {
    const NAME: &str = "a_subscriber_parking_in_exit_is_refused_with_a_message";
    if is_child(NAME) {
        return child(Hook::Exit, Act::Park);
    }
    assert_child_aborts_saying(
        NAME,
        &[
            "fibra: a tracing subscriber blocked (parked or yielded) in `Subscriber::exit`",
            "fibra: a tracing subscriber panicked in `Subscriber::exit`",
        ],
    );
}

#[test]
fn a_subscriber_parking_in_an_unpark_event_is_refused_with_a_message() {
    const NAME: &str = "a_subscriber_parking_in_an_unpark_event_is_refused_with_a_message";
    if is_child(NAME) {
        return child(Hook::Event, Act::Park);
    }
    assert_child_aborts_saying(
        NAME,
        &["fibra: a tracing subscriber blocked (parked or yielded) in `event`"],
    );
}
