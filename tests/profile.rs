//! CPU time and profiles by fiber (issue 63): `FiberInfo::cpu_time` tells a
//! busy fiber from a sleeping one, and a `Profiler`'s profile of a fiber
//! named `burner` that spends its time in one function shows that function
//! and that fiber at the top — in the folded output and in
//! `go tool pprof -top` (where Go is installed; required in CI).

use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fibra::runtime::{Profile, Profiler};

/// One profiler runs at a time in a process: the tests that start one
/// take turns.
static ONE_PROFILER: Mutex<()> = Mutex::new(());

fn one_profiler() -> std::sync::MutexGuard<'static, ()> {
    ONE_PROFILER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Computes for `d` without calling anything in its loop, so that a
/// sample of it lands in this function (in a debug build too).
#[inline(never)]
fn burn_cpu(d: Duration) -> u64 {
    let start = Instant::now();
    let mut x = 0x9E37_79B9_7F4A_7C15_u64;
    while start.elapsed() < d {
        // A `while`, not a range: an unoptimised build calls the range's
        // iterator, where a sample would land instead of here.
        let mut i = 0u32;
        while i < 100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            i += 1;
        }
    }
    x
}

/// Runs a little on the side: so that the profile is not all one fiber.
#[inline(never)]
fn light_work() {
    for _ in 0..20 {
        std::hint::black_box(burn_cpu(Duration::from_millis(1)));
        fibra::sleep(Duration::from_millis(10));
    }
}

/// A runtime whose `burner` burns for `d` beside a sleeper and a light
/// worker, profiled at 200 Hz.
fn profile_of_a_burner(d: Duration) -> Profile {
    let profiler = Profiler::start(200).unwrap();
    fibra::run(|| {
        let burner = fibra::Builder::new()
            .name("burner".into())
            .spawn(move || std::hint::black_box(burn_cpu(d)))
            .unwrap();
        let light = fibra::Builder::new()
            .name("light".into())
            .spawn(light_work)
            .unwrap();
        let sleeper = fibra::Builder::new()
            .name("sleeper".into())
            .spawn(|| fibra::sleep(Duration::from_millis(300)))
            .unwrap();
        burner.join().unwrap();
        light.join().unwrap();
        sleeper.join().unwrap();
    });
    profiler.stop()
}

fn folded(profile: &Profile) -> String {
    let mut out = Vec::new();
    profile.write_folded(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn the_burner_and_its_function_top_the_folded_profile() {
    let _one = one_profiler();
    let profile = profile_of_a_burner(Duration::from_millis(800));
    let text = folded(&profile);
    println!("{text}");
    assert!(profile.samples() >= 20, "{profile:?}\n{text}");
    // Each line: fiber:<name>;outermost;...;innermost COUNT, most first.
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        assert!(stack.starts_with("fiber:"), "{line}");
        count.parse::<u64>().unwrap();
    }
    let top = text.lines().next().unwrap();
    assert!(top.starts_with("fiber:burner;"), "{text}");
    assert!(top.contains("burn_cpu"), "{text}");
    // The root frames come first: the fiber's closure before burn_cpu.
    let (stack, _) = top.rsplit_once(' ').unwrap();
    assert!(stack.ends_with("burn_cpu"), "{text}");
    // The sleeper used next to no CPU: a sample may land in its few
    // microseconds of running, never a tenth of them.
    let sleeper: u64 = text
        .lines()
        .filter(|l| l.starts_with("fiber:sleeper"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert!(sleeper * 10 <= profile.samples(), "{text}");
}

#[test]
fn go_tool_pprof_reads_the_profile() {
    let _one = one_profiler();
    let go = Command::new("go").arg("version").output();
    if go.is_err() || !go.as_ref().unwrap().status.success() {
        assert!(
            std::env::var_os("FIBRA_REQUIRE_GO").is_none(),
            "go is required (FIBRA_REQUIRE_GO is set) but cannot run"
        );
        eprintln!("SKIPPED: no `go` for `go tool pprof`");
        return;
    }
    let profile = profile_of_a_burner(Duration::from_millis(800));
    let dir = std::env::temp_dir().join(format!("fibra-pprof-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cpu.pb");
    let mut file = std::fs::File::create(&path).unwrap();
    profile.write_pprof(&mut file).unwrap();
    drop(file);
    let pprof = |args: &[&str]| {
        let out = Command::new("go")
            .args(["tool", "pprof", "-symbolize=none"])
            .args(args)
            .arg(&path)
            .env("HOME", &dir)
            .env("GOCACHE", dir.join("gocache"))
            .env("PPROF_TMPDIR", &dir)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "go tool pprof {args:?}:\n{stdout}\n{stderr}"
        );
        stdout
    };
    // The function that took the most CPU, first under the header row.
    let top = pprof(&["-top"]);
    println!("{top}");
    assert!(top.contains("Type: cpu"), "{top}");
    let first = top
        .lines()
        .skip_while(|l| !l.contains("flat%"))
        .nth(1)
        .unwrap_or_default();
    assert!(first.contains("burn_cpu"), "{top}");
    // The fiber label: burner holds most of the samples.
    let tags = pprof(&["-tags"]);
    println!("{tags}");
    assert!(tags.contains("fiber:"), "{tags}");
    let burner = tags
        .lines()
        .find(|l| l.contains("burner"))
        .unwrap_or_default();
    assert!(!burner.is_empty(), "{tags}");
    // Kept to one fiber, the burner's function is still there.
    let focused = pprof(&["-top", "-tagfocus=fiber=burner"]);
    assert!(focused.contains("burn_cpu"), "{focused}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_profile_spans_the_workers_of_a_runtime() {
    let _one = one_profiler();
    let rt = fibra::Runtime::builder().workers(2).build().unwrap();
    let profiler = Profiler::start(200).unwrap();
    let burners: Vec<_> = (0..2)
        .map(|w| {
            rt.spawn_on(w, move || {
                fibra::Builder::new()
                    .name(format!("burner-{w}"))
                    .spawn(|| std::hint::black_box(burn_cpu(Duration::from_millis(500))))
                    .unwrap()
                    .join()
                    .unwrap()
            })
        })
        .collect();
    for b in burners {
        b.join().unwrap();
    }
    let profile = profiler.stop();
    let text = folded(&profile);
    println!("{text}");
    // Each worker's burner, caught in its function.
    for w in 0..2 {
        let prefix = format!("fiber:burner-{w};");
        assert!(
            text.lines()
                .any(|l| l.starts_with(&prefix) && l.contains("burn_cpu")),
            "{text}"
        );
    }
    // Both workers' threads are labelled in the pprof output.
    let mut pb = Vec::new();
    profile.write_pprof(&mut pb).unwrap();
    let pb = String::from_utf8_lossy(&pb);
    assert!(pb.contains("fibra-worker-0"), "{text}");
    assert!(pb.contains("fibra-worker-1"), "{text}");
}

#[test]
fn one_profiler_at_a_time_and_a_rate_in_range() {
    let _one = one_profiler();
    for hz in [0, 1001] {
        let err = Profiler::start(hz).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{hz}");
    }
    let first = Profiler::start(100).unwrap();
    let err = Profiler::start(100).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    drop(first); // stopped: another may start
    Profiler::start(100).unwrap().stop();
}

#[test]
fn cpu_time_tells_a_busy_fiber_from_a_sleeping_one() {
    let _one = one_profiler(); // (its busy fiber would show in their profiles)
    let rt = fibra::Runtime::builder().cpu_time(true).build().unwrap();
    rt.block_on(|| {
        let busy = fibra::Builder::new()
            .name("busy".into())
            .spawn(|| {
                std::hint::black_box(burn_cpu(Duration::from_millis(200)));
                fibra::sleep(Duration::from_secs(60));
            })
            .unwrap();
        let sleeper = fibra::Builder::new()
            .name("sleeper".into())
            .spawn(|| {
                for _ in 0..20 {
                    fibra::sleep(Duration::from_millis(10));
                }
                fibra::sleep(Duration::from_secs(60));
            })
            .unwrap();
        fibra::sleep(Duration::from_millis(400));
        let dump = fibra::runtime::Handle::current().dump();
        let ran = |name: &str| {
            dump.fibers()
                .find(|f| f.name.as_deref() == Some(name))
                .unwrap()
                .cpu_time
                .unwrap()
        };
        println!("{dump}");
        assert!(ran("busy") >= Duration::from_millis(150), "{dump}");
        assert!(ran("sleeper") < Duration::from_millis(50), "{dump}");
        assert!(dump.to_string().contains(" ran "), "{dump}");
        // The root's own time is the scheduler's too: not told.
        assert!(
            dump.fibers()
                .filter(|f| f.root)
                .all(|f| f.cpu_time.is_none())
        );
        busy.cancel();
        sleeper.cancel();
    });
    // Off by default: no count, no time.
    let rt = fibra::Runtime::new().unwrap();
    rt.block_on(|| {
        let _h = fibra::spawn(|| fibra::sleep(Duration::from_millis(50)));
        fibra::yield_now();
        let dump = rt.dump();
        assert!(dump.fibers().all(|f| f.cpu_time.is_none()), "{dump}");
    });
}
