//! Fibers in gdb: the extension fibra embeds in every program that links it
//! (`src/observe/debugger/gdb_fibers.py`, in the `.debug_gdb_scripts` section that
//! `src/observe/debugger.rs` writes) lists a stopped program's fibers and
//! walks a parked one's stack.
//!
//! gdb runs this test binary itself (so no attach, and no ptrace rights
//! beyond a parent's are needed), in [`gdb_child`], which runs
//! `examples/gdb_fibers.rs`: named fibers parked in known functions on two
//! runtimes, and a stop in `stop_here`. The extension is loaded by gdb's
//! auto-load, as a user gets it, not sourced by hand.
//!
//! The same example is built as a program of its own at each `debug` level
//! a user builds with (`false`, `"line-tables-only"`, `1`, `2`; see
//! [`level_binary`]) and run under gdb: the extension reads no type from
//! the debug info, so the commands work at each, with files and lines
//! where there are line tables. And with the symbol table stripped, they
//! still exist and say in one line what is missing.
//!
//! Without gdb (or a gdb without Python) the tests say SKIPPED loudly and
//! pass, unless `FIBRA_REQUIRE_GDB=1` (set by `.ci/run`, which installs
//! it): then they fail.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
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
    let info = section(&out, "info fibers");
    check_fibers(&out, info, Seen::LIVE_WITH_LINES, "gdb::example");

    let locker = section(&out, "fiber locker bt");
    check_locker_bt(&out, locker, true);

    let listener = section(&out, "fiber by id");
    assert!(
        listener.contains("wait_for_message"),
        "`fiber N bt`, N the listener's id, names the user's function:\n{out}"
    );
    let reader = section(&out, "fiber reader");
    assert!(
        reader.contains("wait_for_bytes") && reader.contains("UnixStream"),
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
    check_fibers(
        &out,
        section(&out, "info fibers"),
        Seen::WITH_LINES,
        "gdb::example",
    );
    check_locker_bt(&out, section(&out, "fiber locker bt"), true);
}

/// What a run of gdb could see.
#[derive(Clone, Copy)]
struct Seen {
    /// A live process: deadlines are told.
    live: bool,
    /// The program has line tables: files and lines are told.
    lines: bool,
}

impl Seen {
    const LIVE_WITH_LINES: Seen = Seen {
        live: true,
        lines: true,
    };
    const WITH_LINES: Seen = Seen {
        live: false,
        lines: true,
    };
}

/// `info fibers` lists every fiber of both runtimes with its name, state,
/// what it waits on and the user's function it is in (`module::function`,
/// and its file and line where there are line tables).
fn check_fibers(out: &str, info: &str, seen: Seen, module: &str) {
    let line = |name: &str| {
        info.lines()
            .find(|l| l.contains(&format!("\"{name}\"")))
            .unwrap_or_else(|| panic!("`info fibers` lists {name:?}:\n{out}"))
    };
    let expect = [
        ("sleeper", "parked: sleep", "nap"),
        ("locker", "parked: Mutex::lock", "wait_for_lock"),
        ("listener", "parked: channel receive", "wait_for_message"),
        ("reader", "READABLE", "wait_for_bytes"),
        ("worker-sleeper", "parked: sleep", "nap"),
    ];
    for (name, state, function) in expect {
        let l = line(name);
        assert!(l.contains(state), "{name} is {state}: {l:?}\n{out}");
        let at = format!("in {module}::{function}");
        assert!(l.contains(&at), "{name} is {at}: {l:?}\n{out}");
        if seen.lines {
            assert!(
                l.contains(&format!("{at} at ")) && l.contains("examples/gdb_fibers.rs:"),
                "with a file and line: {l:?}\n{out}"
            );
        } else {
            assert!(
                l.trim_end().ends_with(function),
                "no line tables: {l:?}\n{out}"
            );
        }
    }
    assert!(line("reader").contains("parked: fd "), "{out}");
    if seen.live {
        assert!(
            line("sleeper").contains("s left"),
            "a live process's deadlines are told: {out}"
        );
    }
    let waits_on_worker = format!("{module}::wait_on_worker");
    assert!(
        info.lines()
            .any(|l| l.contains("parked: join of fiber") && l.contains(&waits_on_worker)),
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
/// own frame. (gdb names the frames: by their whole path with types,
/// `Mutex<u32>::lock`, by their symbol, `Mutex<T>::lock::h0123...`, or by
/// their last segment, `lock<u32> () at src/sync/mutex.rs:127`, as the
/// debug info lets it.)
fn check_locker_bt(out: &str, bt: &str, lines: bool) {
    assert!(
        bt.lines()
            .any(|l| l.contains("lock") && (l.contains("Mutex<") || l.contains("sync/mutex.rs:"))),
        "the call it parked in:\n{out}"
    );
    assert!(
        bt.lines()
            .any(|l| l.starts_with('#') && l.contains("wait_for_lock")),
        "the user's function:\n{out}"
    );
    if lines {
        assert!(
            bt.contains("examples/gdb_fibers.rs:"),
            "with its line:\n{out}"
        );
    }
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

// ---- every debug level ------------------------------------------------------

#[test]
fn gdb_at_debug_false() {
    at_level("gdb_at_debug_false", Level::False);
}

#[test]
fn gdb_at_debug_line_tables_only() {
    at_level("gdb_at_debug_line_tables_only", Level::LineTablesOnly);
}

#[test]
fn gdb_at_debug_1() {
    at_level("gdb_at_debug_1", Level::Limited);
}

#[test]
fn gdb_at_debug_2() {
    at_level("gdb_at_debug_2", Level::Full);
}

/// A `debug` setting of Cargo's profiles, as users build with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Level {
    /// `debug = false`: no debug info; the symbol table is kept (Cargo's
    /// `strip` is then `"debuginfo"`).
    False,
    /// `debug = "line-tables-only"`: functions, files and lines.
    LineTablesOnly,
    /// `debug = 1`, the usual release setting: no types or variables.
    Limited,
    /// `debug = 2` (`true`): everything, the default of `cargo build`.
    Full,
}

impl Level {
    /// As `--config profile.dev.debug=...` says it.
    fn toml(self) -> &'static str {
        match self {
            Level::False => "false",
            Level::LineTablesOnly => "\"line-tables-only\"",
            Level::Limited => "1",
            Level::Full => "2",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::False => "false",
            Level::LineTablesOnly => "line-tables-only",
            Level::Limited => "1",
            Level::Full => "2",
        }
    }
}

/// At `level`, on a live process: the extension is loaded, `info fibers`
/// lists every fiber with its name and the user's function, `fiber NAME
/// bt` and `fiber ID bt` walk a parked one, all with files and lines where
/// there are line tables; and nothing reaches the user as a Python
/// traceback.
fn at_level(test: &str, level: Level) {
    let Some(_) = Gdb::find(test) else {
        return;
    };
    if cfg!(fibra_asan) {
        say(&format!(
            "SKIPPED {test}: under AddressSanitizer (the plain `cargo test` builds \
             and checks every level)"
        ));
        return;
    }
    let gdb = Gdb {
        exe: level_binary(level),
        test_child: false,
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
            "python import re; m = re.search(r'^\\W*(\\d+) \"listener\"', \
             gdb.execute('info fibers', to_string=True), re.M); \
             gdb.execute('fiber ' + m.group(1) + ' bt')",
            "echo @@end\\n",
        ],
        None,
    );
    no_traceback(&out);
    let lines = level != Level::False;
    let seen = Seen { live: true, lines };
    let info = section(&out, "info fibers");
    check_fibers(&out, info, seen, "gdb_fibers");
    assert_eq!(
        info.contains("(No line tables in this program"),
        !lines,
        "`info fibers` says when files and lines are missing, and only then:\n{out}"
    );
    check_locker_bt(&out, section(&out, "fiber locker bt"), lines);
    assert!(
        section(&out, "fiber by id").contains("wait_for_message"),
        "`fiber N bt`, N the listener's id, walks it:\n{out}"
    );
    // Rust's own entry in the section names a file plain gdb cannot find;
    // where gdb says so, the extension says what it is about.
    if out.contains("Missing auto-load script") {
        assert!(
            out.contains("fibra: that warning is about Rust's own pretty-printers"),
            "the auto-load warning is explained:\n{out}"
        );
    }
}

/// With the symbol table stripped (`strip = "symbols"`, or `strip`), the
/// commands are still there, and say in one line what they miss.
#[test]
fn gdb_with_symbols_stripped() {
    let test = "gdb_with_symbols_stripped";
    let Some(_) = Gdb::find(test) else {
        return;
    };
    if cfg!(fibra_asan) {
        say(&format!("SKIPPED {test}: under AddressSanitizer"));
        return;
    }
    let built = level_binary(Level::False);
    let stripped = built.with_file_name("gdb_fibers-stripped");
    let status = Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(&built)
        .status();
    if !status.is_ok_and(|s| s.success()) {
        say(&format!("SKIPPED {test}: no `strip` (binutils) here"));
        return;
    }
    let gdb = Gdb {
        exe: stripped,
        test_child: false,
    };
    // `starti`: stopped at the first instruction (no symbol to break on).
    let out = gdb.run(
        &[
            "starti",
            "echo @@info fibers\\n",
            "info fibers",
            "echo @@fiber\\n",
            "fiber 1 bt",
            "echo @@end\\n",
            "kill",
        ],
        None,
    );
    no_traceback(&out);
    for name in ["info fibers", "fiber"] {
        let said = section(&out, name).trim();
        assert!(
            said.starts_with("fibra: no symbol FIBRA_0_1_RUNTIMES") && !said.contains('\n'),
            "`{name}` says in one line what is missing:\n{out}"
        );
    }
}

/// No Python error reached the user as Python's (gdb prints an exception
/// that is not a `gdb.GdbError` with its name, and may add a traceback).
fn no_traceback(out: &str) {
    for bad in [
        "Traceback",
        "Python Exception",
        "Error occurred in Python",
        "Undefined info command",
        "Undefined command",
    ] {
        assert!(!out.contains(bad), "gdb printed {bad:?}:\n{out}");
    }
}

/// `examples/gdb_fibers.rs` as a program of its own, built with fibra and
/// itself at `level` (the dependencies without debug info: they do not
/// matter here), as a user's program would be.
///
/// Built by a package made for it under `target/gdb-levels/` (its
/// `Cargo.toml` written here), which depends on fibra alone: not the
/// example itself, whose build needs every dev-dependency. One target
/// directory for all the levels (the running cargo holds ours): the
/// dependencies are built once, fibra and the program once per level, and
/// cargo finds each level's build again the next time. Each program is
/// copied out of `target/gdb-levels/debug/`, which the next level's build
/// overwrites; a lock keeps the builds of this process in turn.
fn level_binary(level: Level) -> PathBuf {
    static BUILDING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/gdb-<hash>
    let target = exe.parent().unwrap().parent().unwrap().parent().unwrap();
    let dir = target.join("gdb-levels");
    let package = dir.join("package");
    std::fs::create_dir_all(&package).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = format!(
        r#"# Written by fibra's tests/gdb.rs: examples/gdb_fibers.rs as a program of
# its own, built at each debug level.
[package]
name = "fibra-gdb-levels"
version = "0.0.0"
edition = "2024"
publish = false

[[bin]]
name = "gdb_fibers"
path = {example:?}

[dependencies]
fibra = {{ path = {root:?} }}

[workspace]

[profile.dev.package."*"]
debug = false
"#,
        example = root.join("examples/gdb_fibers.rs"),
        root = root,
    );
    write_if_changed(&package.join("Cargo.toml"), &manifest);
    // The versions fibra is tested with, already downloaded.
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
    write_if_changed(&package.join("Cargo.lock"), &lock);

    let level_setting = level.toml();
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .current_dir(&package)
        .args(["build", "--offline", "--bin", "gdb_fibers", "--target-dir"])
        .arg(&dir)
        .arg("--config")
        .arg(format!("profile.dev.debug={level_setting}"))
        .arg("--config")
        .arg(format!("profile.dev.package.fibra.debug={level_setting}"))
        // A user's plain build, whatever flags this test was built with.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET");
    let said = output(cargo);
    let built = dir.join("debug/gdb_fibers");
    assert!(
        said.lines().any(|l| l.trim_start().starts_with("Finished")) && built.exists(),
        "cargo could not build examples/gdb_fibers.rs at debug = {level_setting}:\n{said}"
    );
    // Renamed into place: another test may be running the last copy
    // (which writing over would fail with ETXTBSY).
    let copy = dir.join(format!("gdb_fibers-debug-{}", level.name()));
    let fresh = dir.join(format!("gdb_fibers-debug-{}.new", level.name()));
    std::fs::copy(&built, &fresh).unwrap();
    std::fs::rename(&fresh, &copy).unwrap();
    copy
}

/// Writes `text` to `path` unless it holds it already (cargo would see a
/// new manifest or lock as a change).
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).unwrap();
    }
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
    /// `exe` is this test binary, run as [`gdb_child`]; otherwise a
    /// program of its own, run with no arguments.
    test_child: bool,
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
                    test_child: true,
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
        cmd.arg("--args").arg(&self.exe);
        if self.test_child {
            cmd.args(["gdb_child", "--exact", "--nocapture", "--test-threads=1"])
                .env(CHILD, "1");
        }
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
