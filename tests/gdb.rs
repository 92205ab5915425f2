//! Fibers in gdb: the extension fibra embeds in every program that links it
//! (`src/runtime/gdb_fibers.py`, through `#![debugger_visualizer]`) lists
//! a stopped program's fibers and walks a parked one's stack.
//!
//! gdb runs this test binary itself (so no attach, and no ptrace rights
//! beyond a parent's are needed), in [`gdb_child`], which runs
//! `examples/gdb_fibers.rs`: named fibers parked in known functions on two
//! runtimes, and a stop in `stop_here`. The extension is loaded by gdb's
//! auto-load, as a user gets it, not sourced by hand.
//!
//! Without gdb (or a gdb without Python) the tests say SKIPPED loudly and
//! pass, unless `FIBRA_REQUIRE_GDB=1` (set by `.ci/run`, which installs
//! it): then they fail.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../examples/gdb_fibers.rs"]
#[allow(dead_code)]
mod example;

/// Set in the environment of the program gdb runs.
const CHILD: &str = "FIBRA_GDB_CHILD";

/// The program gdb runs: this binary, in this test, with [`CHILD`] set.
#[test]
fn gdb_child() {
    if std::env::var_os(CHILD).is_some() {
        example::park_fibers_and_stop();
    }
}

#[test]
fn info_fibers_and_fiber_bt_in_a_live_process() {
    let Some(gdb) = Gdb::find("info_fibers_and_fiber_bt_in_a_live_process") else {
        return;
    };
    let out = gdb.run(
        &[
            "break stop_here",
            "run",
            "echo @@info fibers\\n",
            "info fibers",
            "echo @@fiber locker bt\\n",
            "fiber locker bt",
            "echo @@fiber by id\\n",
            // By its number, as `info fibers` lists it.
            "python import re; m = re.search(r'^\\W*(\\d+) \"listener\"', \
             gdb.execute('info fibers', to_string=True), re.M); \
             gdb.execute('fiber ' + m.group(1) + ' bt')",
            "echo @@fiber reader\\n",
            "fiber reader",
            "echo @@fiber late\\n",
            "fiber 999999999 bt",
            "echo @@frame after\\n",
            "bt 1",
        ],
        None,
    );
    if built_without_types("info_fibers_and_fiber_bt_in_a_live_process", &out) {
        return;
    }
    let info = section(&out, "info fibers");
    check_fibers(&out, info, true);

    let locker = section(&out, "fiber locker bt");
    check_locker_bt(&out, locker);

    let listener = section(&out, "fiber by id");
    assert!(
        listener.contains("example::wait_for_message"),
        "`fiber N bt`, N the listener's id, names the user's function:\n{out}"
    );
    let reader = section(&out, "fiber reader");
    assert!(
        reader.contains("example::wait_for_bytes") && reader.contains("UnixStream"),
        "`fiber reader` (bt by default) shows the read it waits in:\n{out}"
    );
    assert!(
        section(&out, "fiber late").contains("no fiber 999999999"),
        "an unknown id is told:\n{out}"
    );
    assert!(
        section(&out, "frame after").contains("stop_here"),
        "the thread's own frame is selected again afterwards:\n{out}"
    );
}

/// The same from a core the kernel wrote: nothing of the walk needs a live
/// process (gdb cannot set a core's registers, which Go's `goroutine N bt`
/// does). Skipped, even in CI, where the kernel would not write the core
/// here (a `core_pattern` that pipes to a crash collector, a hard limit of
/// 0, AddressSanitizer's `disable_coredump`).
#[test]
fn info_fibers_and_fiber_bt_in_a_core_file() {
    let test = "info_fibers_and_fiber_bt_in_a_core_file";
    let Some(gdb) = Gdb::find(test) else {
        return;
    };
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    let pattern = pattern.trim();
    if pattern.starts_with('|') || pattern.contains('/') || pattern.is_empty() {
        say(&format!(
            "SKIPPED {test}: the kernel's core_pattern is {pattern:?}: its cores do not \
             land in a directory this test chooses"
        ));
        return;
    }
    let dir = std::env::temp_dir().join(format!("fibra-gdb-core-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Stopped in `stop_here`, the program is killed by SIGABRT, whose
    // default action dumps its core, into gdb's (and so its) directory.
    let out = gdb.run(&["break stop_here", "run", "signal SIGABRT"], Some(&dir));
    let core = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("core"))
        });
    let Some(core) = core else {
        say(&format!(
            "SKIPPED {test}: no core was written (core_pattern {pattern:?}, or a limit \
             or sanitizer that keeps cores off):\n{out}"
        ));
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    let out = gdb.on_core(
        &core,
        &[
            "echo @@info fibers\\n",
            "info fibers",
            "echo @@fiber locker bt\\n",
            "fiber locker bt",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
    if built_without_types(test, &out) {
        return;
    }
    check_fibers(&out, section(&out, "info fibers"), false);
    check_locker_bt(&out, section(&out, "fiber locker bt"));
}

/// Whether the extension found no type information for fibra, as in
/// `cargo test --release` (fibra's release profile keeps line tables
/// only): then the test says SKIPPED. In a debug build that is a failure
/// (the extension no longer finds what it reads), left to the checks.
fn built_without_types(test: &str, out: &str) -> bool {
    if cfg!(debug_assertions) || !out.contains("fibra: no debug info") {
        return false;
    }
    say(&format!(
        "SKIPPED {test}: this build has no debug info for fibra's types (a release \
         build: `debug = \"line-tables-only\"`), which the gdb extension reads"
    ));
    true
}

/// `info fibers` lists every fiber of both runtimes with its name, state,
/// what it waits on and the user's function it is in.
fn check_fibers(out: &str, info: &str, live: bool) {
    let line = |name: &str| {
        info.lines()
            .find(|l| l.contains(&format!("\"{name}\"")))
            .unwrap_or_else(|| panic!("`info fibers` lists {name:?}:\n{out}"))
    };
    let expect = [
        ("sleeper", "parked: sleep", "example::nap at "),
        (
            "locker",
            "parked: Mutex::lock",
            "example::wait_for_lock at ",
        ),
        (
            "listener",
            "parked: channel receive",
            "example::wait_for_message at ",
        ),
        ("reader", "READABLE", "example::wait_for_bytes at "),
        ("worker-sleeper", "parked: sleep", "example::nap at "),
    ];
    for (name, state, at) in expect {
        let l = line(name);
        assert!(l.contains(state), "{name} is {state}: {l:?}\n{out}");
        assert!(l.contains(at), "{name} is in {at}: {l:?}\n{out}");
        assert!(
            l.contains("examples/gdb_fibers.rs:"),
            "with a file and line: {l:?}"
        );
    }
    assert!(line("reader").contains("parked: fd "), "{out}");
    if live {
        assert!(
            line("sleeper").contains("s left"),
            "a live process's deadlines are told: {out}"
        );
    }
    assert!(
        info.lines()
            .any(|l| l.contains("parked: join of fiber") && l.contains("example::wait_on_worker")),
        "the worker's unnamed fiber waits for its named one:\n{out}"
    );
    assert!(
        info.lines().any(|l| l.starts_with('*')
            && l.contains("(block_on)")
            && l.contains("running")
            && l.contains("stop_here")),
        "the root runs, on its thread, in stop_here:\n{out}"
    );
    assert!(
        info.contains("ready, not started"),
        "the fiber spawned last has not run:\n{out}"
    );
    assert_eq!(
        info.matches("Runtime ").count(),
        2,
        "two runtimes, the worker's and block_on's:\n{out}"
    );
}

/// `fiber locker bt` walks the parked fiber's stack from its park, through
/// the user's function, to the fiber's trampoline, and hides the thread's
/// own frame.
fn check_locker_bt(out: &str, bt: &str) {
    assert!(
        bt.contains("Mutex<u32>::lock"),
        "the call it parked in:\n{out}"
    );
    assert!(
        bt.contains("example::wait_for_lock"),
        "the user's function:\n{out}"
    );
    assert!(
        bt.contains("examples/gdb_fibers.rs:"),
        "with its line:\n{out}"
    );
    assert!(
        bt.trim_end()
            .lines()
            .last()
            .is_some_and(|l| l.contains("fibra_0_1_trampoline")),
        "down to the fiber's root:\n{out}"
    );
    assert!(!bt.contains("stop_here"), "not the thread's frames:\n{out}");
    assert!(
        !bt.contains("#0 "),
        "the thread's innermost frame is hidden:\n{out}"
    );
}

/// The text after the `echo @@name` marker, up to the next marker.
fn section<'a>(out: &'a str, name: &str) -> &'a str {
    let marker = format!("@@{name}\n");
    let Some(at) = out.find(&marker) else {
        panic!("no section {name:?} in gdb's output:\n{out}");
    };
    let rest = &out[at + marker.len()..];
    &rest[..rest.find("@@").unwrap_or(rest.len())]
}

struct Gdb {
    exe: PathBuf,
}

impl Gdb {
    /// gdb with Python, or `None` after saying why the test is skipped;
    /// with `FIBRA_REQUIRE_GDB=1`, a panic instead.
    fn find(test: &str) -> Option<Gdb> {
        let python = Command::new("gdb")
            .args(["-batch", "-nx", "-ex", "python print('fibra-' + 'python')"])
            .stdin(Stdio::null())
            .output();
        let why = match python {
            Err(e) => format!("gdb is not installed ({e}; apt-get install gdb)"),
            Ok(out) if !String::from_utf8_lossy(&out.stdout).contains("fibra-python") => {
                format!(
                    "this gdb has no Python, which fibra's extension is written in:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            }
            Ok(_) => {
                return Some(Gdb {
                    exe: std::env::current_exe().unwrap(),
                });
            }
        };
        if std::env::var_os("FIBRA_REQUIRE_GDB").is_some_and(|v| v == "1") {
            panic!("{test}: {why}, and FIBRA_REQUIRE_GDB=1");
        }
        say(&format!("SKIPPED {test}: {why}; nothing was checked"));
        None
    }

    /// The arguments every run starts with: no init files of the user's,
    /// auto-loading allowed for this binary only.
    fn base(&self, cwd: Option<&Path>) -> Command {
        let mut cmd = Command::new("gdb");
        cmd.args(["-batch", "-nx"])
            .args(["-iex", "set debuginfod enabled off"])
            .args(["-iex", "set pagination off"])
            .arg("-iex")
            .arg(format!("add-auto-load-safe-path {}", self.exe.display()));
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        cmd
    }

    /// gdb's output (stdout and stderr) for `commands` run on this binary
    /// as the child.
    fn run(&self, commands: &[&str], cwd: Option<&Path>) -> String {
        let mut cmd = self.base(cwd);
        for c in commands {
            cmd.args(["-ex", c]);
        }
        cmd.arg("--args")
            .arg(&self.exe)
            .args(["gdb_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1");
        if cwd.is_some() {
            // Let the kernel write the child's core: raise the soft limit
            // (inherited through gdb) as far as the hard one allows.
            let mut sh = Command::new("sh");
            sh.args([
                "-c",
                "ulimit -c unlimited 2>/dev/null || ulimit -c \"$(ulimit -H -c)\"; exec \"$@\"",
                "sh",
            ])
            .arg(cmd.get_program())
            .args(cmd.get_args())
            .env(CHILD, "1");
            if let Some(dir) = cwd {
                sh.current_dir(dir);
            }
            return output(sh);
        }
        output(cmd)
    }

    /// gdb's output for `commands` on `core`, a core of this binary.
    fn on_core(&self, core: &Path, commands: &[&str]) -> String {
        let mut cmd = self.base(None);
        for c in commands {
            cmd.args(["-ex", c]);
        }
        cmd.arg(&self.exe).arg(core);
        output(cmd)
    }
}

/// Runs `cmd` to its end (two minutes at most: a hung gdb is killed and
/// the test fails) and returns what it wrote, stdout and stderr in one
/// stream, in order (an error is told where it happened).
fn output(mut cmd: Command) -> String {
    let (mut reader, writer) = std::io::pipe().unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .unwrap();
    // The parent's copies of the write end went with `cmd`'s: the reader
    // sees the end when gdb and the program it ran have exited.
    drop(cmd);
    let text = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = reader.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });
    let start = Instant::now();
    let timed_out = loop {
        if child.try_wait().unwrap().is_some() {
            break false;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            break true;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = text.join().unwrap();
    assert!(!timed_out, "gdb did not finish within 120 s:\n{text}");
    text
}

fn say(message: &str) {
    // Straight to the process's stderr: libtest's capture would hide it
    // from a passing test.
    let _ = writeln!(std::io::stderr(), "{message}");
}
