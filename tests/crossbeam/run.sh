#!/usr/bin/env bash
# crossbeam-channel's own test suite (the tests/ folder of the released
# crate, fetched from crates.io) against fibra::channel, in three modes:
#
#   threads  the tests unmodified: the `crossbeam-channel` they import is a
#            shim whose API is fibra's (shim_lib.rs);
#   fibers   every test body in fibra::run, their std::thread and
#            crossbeam-utils scope imports pointed at fibers (adapt.py,
#            fibered_lib.rs): spawned "threads" are fibers of one thread;
#   workers  the same in a workers(2) runtime, spawns spread over both.
#
# Usage: tests/crossbeam/run.sh [MODE...]        (default: all three)
# Env:   SUITE_DIR (scratch; default target/crossbeam-suite),
#        CROSSBEAM_VERSION (default 0.5.17), LIMIT (s a file), TEST_LIMIT.
# A file that does not finish within LIMIT is run again one test at a time,
# so every test gets a verdict. The tests that busy-wait on a try_
# operation (recv_try_iter, stress_iter, loop_try, test_recv_try_iter), one
# fiber polling while the fiber it waits for needs its thread, pass in the
# fiber modes because a fiber whose non-blocking calls keep failing yields
# now and then (src/scheduler/fair.rs); they were skipped there before.
# So do port_gone_concurrent and port_gone_concurrent_shared, which spin on
# an unbounded `send` (it never fails nor waits) until the receiver is
# gone: such a send yields every 1 024th time in a row. No test is skipped.
# Exit status: 0 when every test passed. std_mpsc (written by adapt.py from mpsc.rs)
# runs std's own mpsc tests on fibra::sync::mpsc's faces.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/crossbeam
work=${SUITE_DIR:-$root/target/crossbeam-suite}
ver=${CROSSBEAM_VERSION:-0.5.17}
LIMIT=${LIMIT:-300}
TEST_LIMIT=${TEST_LIMIT:-60}
modes=${*:-threads fibers workers}
export CARGO_TARGET_DIR=$work/target
mkdir -p "$work"

# Tests skipped in the fiber modes (see above): none now.
known_busy_waits=""

# The released crate's sources, tests included, from crates.io.
mkdir -p "$work/fetch/src"
: >"$work/fetch/src/lib.rs"
cat >"$work/fetch/Cargo.toml" <<TOML
[package]
name = "fetch-crossbeam"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
crossbeam-channel = "=$ver"
[workspace]
TOML
src=$(cargo metadata --format-version 1 --manifest-path "$work/fetch/Cargo.toml" |
    python3 -c 'import json,sys,os; m=json.load(sys.stdin); print(os.path.dirname(next(p["manifest_path"] for p in m["packages"] if p["name"]=="crossbeam-channel")))') ||
    { echo "!! could not fetch crossbeam-channel $ver"; exit 1; }
echo "== crossbeam-channel $ver's tests from $src/tests"

crate() { # name dir lib.rs [extra dependencies]
    mkdir -p "$work/$2/src"
    cp "$3" "$work/$2/src/lib.rs"
    cat >"$work/$2/Cargo.toml" <<TOML
[package]
name = "$1"
version = "$ver"
edition = "2021"
publish = false
[dependencies]
fibra = { path = "$root" }
[workspace]
TOML
}
crate crossbeam-channel crossbeam-channel "$here/shim_lib.rs"
crate fibered fibered "$here/fibered_lib.rs"

status=0
for mode in $modes; do
    suite=$work/suite-$mode
    rm -rf "$suite/tests"
    mkdir -p "$suite/src"
    : >"$suite/src/lib.rs"
    cat >"$suite/Cargo.toml" <<TOML
[package]
name = "crossbeam-suite-$mode"
version = "0.0.0"
edition = "2021"
publish = false
[dev-dependencies]
crossbeam-channel = { path = "../crossbeam-channel" }
fibered = { path = "../fibered" }
fibra = { path = "$root" }
crossbeam-utils = "0.8"
rand = "0.8"
num_cpus = "1"
signal-hook = "0.3"
[lints.rust]
unexpected_cfgs = "allow"
[workspace]
TOML
    python3 "$here/adapt.py" "$src/tests" "$suite/tests" "$mode"
    skip=()
    if [ "$mode" != threads ] && [ -n "$known_busy_waits" ]; then
        for t in $known_busy_waits; do skip+=(--skip "$t"); done
        echo "== $mode: skipped (busy-wait on try_ without blocking): $known_busy_waits"
    fi
    export SUITE_MODE=$mode
    echo "== $mode: building"
    cargo test --release --no-run --manifest-path "$suite/Cargo.toml" >"$work/build-$mode.log" 2>&1 ||
        { tail -30 "$work/build-$mode.log"; status=1; continue; }
    pass=0; fail=0
    for f in "$suite"/tests/*.rs; do
        t=$(basename "$f" .rs)
        log=$work/$mode-$t.log
        timeout -k 10 "$LIMIT" cargo test -q --release --manifest-path "$suite/Cargo.toml" --test "$t" \
            -- --test-threads=2 "${skip[@]}" >"$log" 2>&1
        if grep -q '^test result: ok' "$log"; then
            n=$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' "$log")
            pass=$((pass + n)); printf '%-9s %-14s %4s passed\n' "$mode" "$t" "$n"
            continue
        fi
        printf '%-9s %-14s did not pass as a file; one test at a time:\n' "$mode" "$t"
        names=$(cargo test -q --release --manifest-path "$suite/Cargo.toml" --test "$t" -- --list "${skip[@]}" 2>/dev/null | sed -n 's/: test$//p')
        if [ -z "$names" ]; then
            # Not even listed (it does not build): the whole file failed.
            fail=$((fail + 1)); echo "    FAILED $t: no test could be listed; $(grep -m1 '^error' "$log")"
            continue
        fi
        for name in $names; do
            if timeout -k 5 "$TEST_LIMIT" cargo test -q --release --manifest-path "$suite/Cargo.toml" --test "$t" \
                -- --exact "$name" --nocapture >"$log.one" 2>&1; then
                pass=$((pass + 1))
            else
                fail=$((fail + 1)); echo "    FAILED $t::$name: $(grep -m1 -A2 'panicked at' "$log.one" | tr '\n' ' ' | cut -c1-160)"
            fi
        done
    done
    echo "== $mode: $pass passed, $fail failed or hung"
    [ "$fail" = 0 ] || status=1
done
exit $status
