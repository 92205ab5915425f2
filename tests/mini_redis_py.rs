//! redis-py, the most used Python client, against `examples/mini_redis`.
//!
//! `tests/mini_redis_py/client.py` runs basics, pipelines (the default
//! transactional one and a plain one), pub/sub (with a handler thread) and
//! 20 threads on one connection pool; here it runs in redis-py's default
//! protocol (RESP3 from redis-py 8 on; the script checks that it is), in
//! RESP2 and in RESP3, each against a mini_redis of its own.
//!
//! redis-py comes from a virtualenv that `.ci/run` makes:
//!
//! ```sh
//! python3 -m venv target/redis-py-venv && target/redis-py-venv/bin/pip install redis
//! ```
//!
//! or from the Python that `FIBRA_REDIS_PY` names. Without either the tests
//! say SKIPPED and pass, unless `FIBRA_REQUIRE_REDIS_PY=1` (set by `.ci/run`
//! once it has installed redis-py), where they fail.

#[path = "util/mini_redis.rs"]
mod mini;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mini::mini_redis;

/// A Python that can `import redis`, if there is one.
fn python() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var_os("FIBRA_REDIS_PY")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/redis-py-venv/bin/python"));
    let works = Command::new(&python)
        .args(["-c", "import redis"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    works.then_some(python)
}

fn skip(test: &str) {
    if std::env::var_os("FIBRA_REQUIRE_REDIS_PY").is_some_and(|v| v == "1") {
        panic!(
            "{test}: no redis-py (target/redis-py-venv or FIBRA_REDIS_PY) and FIBRA_REQUIRE_REDIS_PY=1"
        );
    }
    let msg = format!(
        "SKIPPED {test}: redis-py is not installed; nothing was tested. Install it with \
         `python3 -m venv target/redis-py-venv && target/redis-py-venv/bin/pip install redis` \
         (or point FIBRA_REDIS_PY at a Python that has it)"
    );
    // Straight to the process's stderr: libtest's capture (which takes
    // `println!` and `eprintln!`) would hide it from a passing test.
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// Runs the script with `protocol` (`default`, `2` or `3`).
fn redis_py(test: &str, protocol: &str) {
    let Some(python) = python() else {
        return skip(test);
    };
    let server = mini_redis();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mini_redis_py/client.py");
    // `timeout`: a hang fails the test instead of stalling the suite.
    let out = Command::new("timeout")
        .arg("300")
        .arg(&python)
        .arg(&script)
        .arg(server.port.to_string())
        .arg(protocol)
        .output()
        .expect("cannot run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("all passed"),
        "redis-py ({protocol}) failed: {}\n{stdout}\n{stderr}",
        out.status
    );
}

#[test]
fn redis_py_in_its_default_protocol() {
    redis_py("redis_py_in_its_default_protocol", "default");
}

#[test]
fn redis_py_over_resp2() {
    redis_py("redis_py_over_resp2", "2");
}

#[test]
fn redis_py_over_resp3() {
    redis_py("redis_py_over_resp3", "3");
}
