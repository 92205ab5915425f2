#!/usr/bin/env bash
# std's own sync tests (library/std/tests/sync in the rust-src component of
# a nightly toolchain) against fibra::sync, in two modes:
#
#   threads  the test bodies unchanged; the sync types they test (Mutex,
#            RwLock, Condvar, Barrier, Once, OnceLock, LazyLock, guards, mpsc,
#            oneshot, TryLockError, ...) are fibra's; Arc, atomics and
#            std's threads stay std's;
#   fibers   the same, every test body in fibra::run, and std::thread's
#            spawn/scope/sleep/yield_now pointed at fibers (fibered_lib.rs):
#            the "threads" a test spawns are fibers of one thread.
#
# adapt.py writes the tests (one test target per std file) and says which
# tests are skipped, each with its reason: the `nonpoison_` twins (fibra has
# the poisoning API only) and the tests of API fibra lacks. No test is
# skipped because it fails.
#
# Usage: tests/std_sync/run.sh [MODE...]        (default: threads fibers)
# Env:   SUITE_DIR (scratch; default target/std-sync-suite),
#        STD_TOOLCHAIN (default nightly: the tests need #![feature]s, and
#        rust-src of that toolchain, installed here if missing),
#        LIMIT (s for a file, default 120; the slowest, rwlock, takes ~10 s),
#        TEST_LIMIT (s for one test when a file is run again test by test,
#        default 60).
# A file that does not finish within LIMIT (a hang) or dies (an abort) is
# run again one test at a time, so every test gets a verdict.
# Exit status: 0 when every test that ran passed.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/std_sync
work=${SUITE_DIR:-$root/target/std-sync-suite}
tc=${STD_TOOLCHAIN:-nightly}
LIMIT=${LIMIT:-120}
TEST_LIMIT=${TEST_LIMIT:-60}
modes=${*:-threads fibers}
export CARGO_TARGET_DIR=$work/target
mkdir -p "$work"

# The toolchain and its rust-src (std's tests are in it).
if ! rustup run "$tc" rustc --version >/dev/null 2>&1; then
    echo "== installing toolchain $tc"
    rustup toolchain install "$tc" --profile minimal || { echo "!! no toolchain $tc"; exit 1; }
fi
sysroot=$(rustup run "$tc" rustc --print sysroot)
src=$sysroot/lib/rustlib/src/rust/library/std/tests/sync
if [ ! -f "$src/lib.rs" ]; then
    echo "== installing rust-src for $tc"
    rustup component add rust-src --toolchain "$tc" || { echo "!! no rust-src for $tc"; exit 1; }
fi
STD_RUSTC="$(rustup run "$tc" rustc --version)"
export STD_RUSTC # (for adapt.py's headers)
echo "== std's sync tests from $src ($STD_RUSTC)"

# The first line of a test's panic in a libtest log: "name: message".
first_panic() { # log
    grep -m1 -A1 'panicked at' "$1" | tr '\n' ' ' | sed 's/^thread //' | cut -c1-220
}

total_pass=0; total_fail=0; total_skip=0
status=0
for mode in $modes; do
    case $mode in threads|fibers) ;; *) echo "!! no mode $mode"; status=1; continue ;; esac
    start=$SECONDS
    suite=$work/suite-$mode
    rm -rf "$suite/tests"
    rm -f "$work/$mode"-*.log*
    mkdir -p "$suite/src"
    cp "$here/fibered_lib.rs" "$suite/src/lib.rs"
    cat >"$suite/Cargo.toml" <<TOML
[package]
name = "std-sync-suite-$mode"
version = "0.0.0"
edition = "2024"
publish = false
[lib]
name = "fibered"
path = "src/lib.rs"
[dependencies]
fibra = { path = "$root" }
[dev-dependencies]
# What std's tests/common/mod.rs uses (std's own dev-dependencies).
rand = { version = "0.9", default-features = false, features = ["alloc"] }
rand_xorshift = "0.4"
[workspace]
TOML
    python3 "$here/adapt.py" "$src" "$suite/tests" "$mode" || { status=1; continue; }
    # (An array, not a function: `timeout` runs it.)
    cargo_test=(cargo "+$tc" test --release --manifest-path "$suite/Cargo.toml")
    echo "== $mode: building"
    build_log=$work/build-$mode.log
    "${cargo_test[@]}" --no-run >"$build_log" 2>&1 || echo "== $mode: not every target builds (see $build_log)"
    printf '%-8s %-15s %7s %7s %7s\n' mode file passed failed skipped
    pass=0; fail=0; skip=0; failures=()
    files=$( { ls "$suite/tests"/*.rs | xargs -n1 basename | sed 's/\.rs$//'; cut -f1 "$suite/skipped.tsv"; } | sort -u)
    for t in $files; do
        s=$(awk -F'\t' -v f="$t" '$1 == f' "$suite/skipped.tsv" | wc -l)
        p=0; f=0
        if [ -f "$suite/tests/$t.rs" ]; then
            log=$work/$mode-$t.log
            if ! "${cargo_test[@]}" --no-run --test "$t" >"$log.build" 2>&1; then
                # It does not build: each of its tests failed.
                f=$(awk -F'\t' -v f="$t" '$1 == f' "$suite/kept.tsv" | wc -l)
                failures+=("$t (all $f tests): does not build: $(grep -m1 -A3 '^error' "$log.build" | tr '\n' ' ' | cut -c1-300)")
            else
                # stdout apart from stderr: what fibra writes to stderr (its
                # stall warnings) must not split libtest's "test x ... ok" lines.
                timeout -k 10 "$LIMIT" "${cargo_test[@]}" --test "$t" -- --test-threads=2 >"$log" 2>"$log.err"
                ok=$(sed -nE 's/^test (\S+)( - should panic)? \.\.\. ok$/\1/p' "$log")
                bad=$(sed -nE 's/^test (\S+)( - should panic)? \.\.\. FAILED$/\1/p' "$log")
                ign=$(sed -nE 's/^test (\S+)( - should panic)? \.\.\. ignored.*$/\1/p' "$log")
                p=$(grep -c . <<<"$ok"); f=$(grep -c . <<<"$bad"); i=$(grep -c . <<<"$ign")
                # When the file finished, libtest's own counts are the verdict.
                read -r p2 f2 i2 < <(sed -nE 's/^test result: \w+\. ([0-9]+) passed; ([0-9]+) failed; ([0-9]+) ignored.*/\1 \2 \3/p' "$log")
                [ -n "${p2:-}" ] && { p=$p2; f=$f2; i=$i2; }
                s=$((s + i))
                for name in $bad; do
                    msg=$(awk -v n="---- $name stdout ----" '$0 == n {on=1; next} /^---- / {on=0} on' "$log" |
                        grep -m1 -A1 'panicked at' | tr '\n' ' ' | cut -c1-220)
                    failures+=("$name: ${msg:-see $log}")
                done
                if ! grep -q '^test result:' "$log"; then
                    # Hung (LIMIT) or died: the tests without a verdict, one at a time.
                    all=$("${cargo_test[@]}" --test "$t" -- --list 2>/dev/null | sed -n 's/: test$//p')
                    for name in $all; do
                        grep -qxF "$name" <<<"$ok"$'\n'"$bad"$'\n'"$ign" && continue
                        one=$work/$mode-$name.one.log
                        timeout -k 5 "$TEST_LIMIT" "${cargo_test[@]}" --test "$t" -- --exact "$name" --nocapture >"$one" 2>&1
                        rc=$?
                        if [ $rc = 0 ] && grep -q '^test result: ok' "$one"; then
                            p=$((p + 1))
                        else
                            f=$((f + 1))
                            if [ $rc = 124 ] || [ $rc = 137 ]; then
                                failures+=("$name: hung (no verdict within TEST_LIMIT=${TEST_LIMIT}s)")
                            else
                                failures+=("$name: exit $rc: $(first_panic "$one")")
                            fi
                        fi
                    done
                fi
            fi
        fi
        printf '%-8s %-15s %7s %7s %7s\n' "$mode" "$t" "$p" "$f" "$s"
        pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    done
    for line in "${failures[@]}"; do echo "    FAILED $line"; done
    echo "== $mode: $pass passed, $fail failed, $skip skipped in $((SECONDS - start)) s (skips and reasons: $suite/skipped.tsv)"
    total_pass=$((total_pass + pass)); total_fail=$((total_fail + fail)); total_skip=$((total_skip + skip))
    [ "$fail" = 0 ] || status=1
done
echo "std_sync: $total_pass passed, $total_fail failed, $total_skip skipped"
exit $status
