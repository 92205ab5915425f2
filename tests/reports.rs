//! Seeing inside with no setup (issue 63): with no `tracing` subscriber set,
//! fibra's warnings go to stderr — a deadlock and a stall with the file and
//! line of the fiber's code — and with one set they go to it alone; a
//! runtime built with `OnDeadlock::Exit` prints its report and exits with
//! status 2, as Go does, on one thread and on workers. Each case runs in a
//! child process (this test binary again), whose stderr and exit status
//! are the things under test.

mod util;

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fibra::runtime::OnDeadlock;
use util::locks::{lock_a_then_b, lock_b_then_a};

const STALL: Duration = Duration::from_millis(20);

/// How long a child has to say what it must: naming stacks loads the debug
/// info, which takes seconds under a sanitizer on a loaded machine.
const WITHIN: Duration = Duration::from_secs(60);

/// A child process (this binary, running test `name` as the child) whose
/// stderr is read as it comes.
struct Watched {
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Watched {
    fn start(name: &str) -> Watched {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env("FIBRA_CHILD", name)
            .env("RUST_BACKTRACE", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot run the test binary as a child");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let into = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                into.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Watched { child, stderr }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until stderr holds every one of `all`; panics with what it
    /// holds after [`WITHIN`].
    fn wait_for(&mut self, all: &[&str]) -> String {
        let deadline = Instant::now() + WITHIN;
        loop {
            let text = self.stderr();
            if all.iter().all(|s| text.contains(s)) {
                return text;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(100)); // the last bytes
                panic!(
                    "the child ended ({status}) without {all:?}:\n{}",
                    self.stderr()
                );
            }
            assert!(Instant::now() < deadline, "no {all:?} in:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the child to end; its status and whole stderr.
    fn wait(mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + WITHIN;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the child did not end:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(200)); // the reader's last bytes
        (status, self.stderr())
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_child(name: &str) -> bool {
    std::env::var("FIBRA_CHILD").is_ok_and(|v| v == name)
}

#[test]
fn a_deadlock_with_no_subscriber_is_told_on_stderr_with_file_and_line() {
    const NAME: &str = "a_deadlock_with_no_subscriber_is_told_on_stderr_with_file_and_line";
    if is_child(NAME) {
        let rt = fibra::Runtime::builder()
            .stall_warning(STALL)
            .build()
            .unwrap();
        rt.block_on(util::locks::deadlock_two_fibers); // never returns
        return;
    }
    let mut child = Watched::start(NAME);
    let text = child.wait_for(&["fibra WARN fibra::deadlock: ", "lock_b_then_a"]);
    // One line, then the dump below it, each fiber's stack naming where its
    // code waits.
    assert!(
        text.contains("this is a deadlock\n"),
        "the message is not one line:\n{text}"
    );
    assert!(text.contains("\"a-then-b\""), "{text}");
    assert!(text.contains("lock_a_then_b"), "{text}");
    assert!(
        text.contains("tests/util/locks.rs:"),
        "no file:line:\n{text}"
    );
    // A warning, not an exit: the child still runs.
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.child.try_wait().unwrap().is_none(), "{text}");
}

/// Spins without blocking for 300 ms, where the stall's stack must name
/// this function.
#[inline(never)]
fn spin_for_a_while() {
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        std::hint::spin_loop();
    }
}

/// Loads the debug info the names come from, as a first dump does: the
/// watchdog waits a bounded time for a stall's names, then warns with
/// addresses.
fn load_debug_info() {
    let rt = fibra::Runtime::new().unwrap();
    rt.spawn(|| fibra::sleep(Duration::from_secs(60)));
    rt.turn(Some(Duration::ZERO));
    let _ = rt.dump().to_string();
}

#[test]
fn a_stall_with_no_subscriber_is_told_on_stderr_with_file_and_line() {
    const NAME: &str = "a_stall_with_no_subscriber_is_told_on_stderr_with_file_and_line";
    if is_child(NAME) {
        load_debug_info();
        let rt = fibra::Runtime::builder()
            .stall_warning(STALL)
            .build()
            .unwrap();
        // Stalls until the parent has seen one named: the first may be
        // told with addresses only while the debug info loads (the
        // watchdog waits a bounded time for names).
        rt.block_on(|| {
            let start = Instant::now();
            while start.elapsed() < WITHIN {
                fibra::Builder::new()
                    .name("spinner".into())
                    .spawn(spin_for_a_while)
                    .unwrap()
                    .join()
                    .unwrap();
            }
        });
        return;
    }
    let mut child = Watched::start(NAME);
    let text = child.wait_for(&["spin_for_a_while", "before it parked"]);
    assert!(text.contains("fibra WARN fibra::stall: "), "{text}");
    assert!(text.contains("fiber 'spinner'"), "{text}");
    assert!(text.contains("has run for"), "{text}");
    // Where it was spawned, and its stack naming the function's file.
    assert!(text.contains("spawned at tests/reports.rs:"), "{text}");
    assert!(text.contains("tests/reports.rs:"), "{text}");
}

/// The first stall of a process, before any debug info is loaded: its
/// stack is named, in the warning or, when loading the debug info takes
/// longer than the warning waits, in a warning of its own right after.
#[test]
fn the_first_stall_of_a_process_gets_its_stack_named() {
    const NAME: &str = "the_first_stall_of_a_process_gets_its_stack_named";
    if is_child(NAME) {
        let rt = fibra::Runtime::builder()
            .stall_warning(STALL)
            .build()
            .unwrap();
        rt.block_on(|| {
            fibra::Builder::new()
                .name("first".into())
                .spawn(spins_once_in_a_named_function)
                .unwrap()
                .join()
                .unwrap();
            // Held until the parent has read what it needs.
            fibra::sleep(WITHIN);
        });
        return;
    }
    let mut child = Watched::start(NAME);
    let text = child.wait_for(&["fiber 'first'", "spins_once_in_a_named_function"]);
    assert!(text.contains("has run for"), "{text}");
    if let Some(at) = text.find("not named within") {
        // Told with addresses first: the names follow, in a warning of
        // their own.
        let late = text[at..]
            .find("in the stall warning above")
            .unwrap_or_else(|| panic!("no late names:\n{text}"));
        assert!(
            text[at + late..].contains("spins_once_in_a_named_function"),
            "{text}"
        );
    }
}

#[inline(never)]
fn spins_once_in_a_named_function() {
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        std::hint::spin_loop();
    }
}

#[test]
fn with_a_subscriber_set_nothing_goes_to_stderr() {
    const NAME: &str = "with_a_subscriber_set_nothing_goes_to_stderr";
    if is_child(NAME) {
        // A subscriber that takes fibra's events and prints them nowhere.
        let subscriber = tracing_subscriber::fmt()
            .with_writer(std::io::sink)
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        let rt = fibra::Runtime::builder()
            .stall_warning(STALL)
            .build()
            .unwrap();
        rt.block_on(|| {
            fibra::spawn(spin_for_a_while).join().unwrap();
        });
        return;
    }
    let (status, text) = Watched::start(NAME).wait();
    assert!(status.success(), "{status}:\n{text}");
    assert!(!text.contains("fibra WARN"), "{text}");
}

#[test]
fn on_deadlock_exit_prints_the_stacks_and_exits_2() {
    const NAME: &str = "on_deadlock_exit_prints_the_stacks_and_exits_2";
    if is_child(NAME) {
        let rt = fibra::Runtime::builder()
            .stall_warning(STALL)
            .on_deadlock(OnDeadlock::Exit)
            .build()
            .unwrap();
        rt.block_on(util::locks::deadlock_two_fibers);
        unreachable!("the deadlock ends the process");
    }
    let (status, text) = Watched::start(NAME).wait();
    assert_eq!(status.code(), Some(2), "{status}:\n{text}");
    assert!(text.contains("fibra WARN fibra::deadlock: "), "{text}");
    assert!(text.contains("lock_a_then_b"), "{text}");
    assert!(text.contains("lock_b_then_a"), "{text}");
    assert!(text.contains("tests/util/locks.rs:"), "{text}");
    assert!(text.contains("exiting with status 2"), "{text}");
}

#[test]
fn on_deadlock_exit_on_two_workers_exits_2() {
    const NAME: &str = "on_deadlock_exit_on_two_workers_exits_2";
    if is_child(NAME) {
        let rt = fibra::Runtime::builder()
            .stall_warning(STALL)
            .on_deadlock(OnDeadlock::Exit)
            .workers(2)
            .build()
            .unwrap();
        // One fiber on each worker, each holding the lock the other wants.
        let a = Arc::new(fibra::sync::Mutex::new(0));
        let b = Arc::new(fibra::sync::Mutex::new(0));
        let both = Arc::new(fibra::sync::Barrier::new(2));
        let (a2, b2, both2) = (a.clone(), b.clone(), both.clone());
        let one = rt.spawn_on(0, move || lock_a_then_b(&a2, &b2, &both2));
        let two = rt.spawn_on(1, move || lock_b_then_a(&a, &b, &both));
        let _ = one.join();
        let _ = two.join();
        unreachable!("the deadlock ends the process");
    }
    let (status, text) = Watched::start(NAME).wait();
    assert_eq!(status.code(), Some(2), "{status}:\n{text}");
    assert!(text.contains("workers of a runtime"), "{text}");
    assert!(text.contains("lock_a_then_b"), "{text}");
    assert!(text.contains("lock_b_then_a"), "{text}");
}

#[test]
fn on_deadlock_exit_leaves_a_program_that_ends_alone() {
    const NAME: &str = "on_deadlock_exit_leaves_a_program_that_ends_alone";
    if is_child(NAME) {
        // A deadlock is told after 1 s of looking like one.
        let rt = fibra::Runtime::builder()
            .stall_warning(Duration::from_millis(100))
            .on_deadlock(OnDeadlock::Exit)
            .build()
            .unwrap();
        // The root waits on a plain thread's send: the runtime looks
        // deadlocked while it waits (no timer, no fd), but not for long.
        let (tx, rx) = fibra::channel::bounded(0);
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            tx.send(1).unwrap();
        });
        rt.block_on(|| {
            fibra::sleep(Duration::from_millis(40));
            assert_eq!(rx.recv(), Ok(1));
        });
        sender.join().unwrap();
        return;
    }
    let (status, text) = Watched::start(NAME).wait();
    assert!(status.success(), "{status}:\n{text}");
    assert!(!text.contains("deadlock"), "{text}");
}
