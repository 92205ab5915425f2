#!/usr/bin/env bash
# What the stall watchdog (issue 18) costs: the criterion benches `switch`
# (yield_round_trip, sleep_zero) and `spawn` (spawn_join_empty), and echo
# round trips against examples/echo_server, each built from a clean
# `git worktree` at BEFORE_REV (default 2b847b1, the commit before the
# watchdog) and at HEAD, run ALTERNATED (before, after, after, before, ...)
# so that a machine that slows down or speeds up mid-run weighs on both
# sides alike. Prints, per figure, the median and min-max of each side and
# the after/before ratio of the medians.
#
#   bash benches/watchdog_cost.sh              # HEAD against 2b847b1
#   bash benches/watchdog_cost.sh v0.1.0       # against another revision
#   RUNS=9 ECHO_SECS=5 bash benches/watchdog_cost.sh
#
# Timings are only as quiet as the machine: on a shared or loaded one a
# few percent either way is noise (count instructions with
# `valgrind --tool=callgrind` to decide a few percent). The benches run
# pinned to core 0; the echo server runs pinned to core 0 and its load
# generator (a std-only client compiled here with rustc) to core 1, and
# the echo figures are round trips per second and the server's CPU time
# per round trip (utime + stime from /proc/PID/stat), which does not
# depend on how fast the client is. Needs git, cargo, rustc, taskset.
# Not run by .ci/run (it takes minutes and measures, it does not check).
set -euo pipefail

before_rev=${1:-2b847b1}
RUNS=${RUNS:-5}                 # runs of each side, alternated
BENCH_SECS=${BENCH_SECS:-2}     # criterion measurement time per figure
ECHO_SECS=${ECHO_SECS:-3}       # echo load per run
CONNS=${CONNS:-50}              # echo connections
SIZE=${SIZE:-64}                # echo message bytes

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
after_rev=$(git -C "$root" rev-parse --short HEAD)
cores=$(nproc)
server_core=0
client_core=$((cores > 1 ? 1 : 0))
[ "$cores" -gt 1 ] || echo "!! one core: server and client share it"

tmp=$(mktemp -d)
server_pid=
cleanup() {
    # (No `&&` list whose last command may fail: under `set -e` it would
    # end the cleanup there and leave the worktrees behind.)
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
    for side in before after; do
        git -C "$root" worktree remove --force "$tmp/$side" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

echo "== worktrees: before = $before_rev, after = HEAD ($after_rev)"
git -C "$root" worktree add --quiet --detach "$tmp/before" "$before_rev"
git -C "$root" worktree add --quiet --detach "$tmp/after" "$after_rev"
mkdir -p "$tmp/bin" "$tmp/data"

# One target dir for both sides: the dependencies build once; each side's
# executables are copied out as soon as they are built.
export CARGO_TARGET_DIR="$tmp/target"
for side in before after; do
    echo "== building $side"
    for bench in switch spawn; do
        exe=$(cd "$tmp/$side" && cargo bench --bench "$bench" --no-run 2>&1 |
            sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -1)
        [ -n "$exe" ] || { echo "no $bench bench executable for $side"; exit 1; }
        case "$exe" in /*) ;; *) exe="$tmp/$side/$exe" ;; esac
        cp "$exe" "$tmp/bin/$side-$bench"
    done
    (cd "$tmp/$side" && cargo build --release --quiet --example echo_server)
    cp "$CARGO_TARGET_DIR/release/examples/echo_server" "$tmp/bin/$side-echo_server"
done

# The load generator: std only, a thread per connection, each sending
# SIZE bytes and reading them back until the time is up; prints the round
# trips. With `probe`, only says (exit status) whether the port accepts.
cat > "$tmp/echo_client.rs" <<'EOF'
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let port: u16 = a[1].parse().unwrap();
    if a[2] == "probe" {
        std::process::exit(i32::from(TcpStream::connect(("127.0.0.1", port)).is_err()));
    }
    let (conns, size, secs): (usize, usize, u64) =
        (a[2].parse().unwrap(), a[3].parse().unwrap(), a[4].parse().unwrap());
    let deadline = Instant::now() + Duration::from_secs(secs);
    let clients: Vec<_> = (0..conns)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_nodelay(true).unwrap();
                let (msg, mut back) = (vec![7u8; size], vec![0u8; size]);
                let mut n = 0u64;
                while Instant::now() < deadline {
                    s.write_all(&msg).unwrap();
                    s.read_exact(&mut back).unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let total: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    println!("{total}");
}
EOF
rustc -O --edition 2021 -o "$tmp/bin/echo_client" "$tmp/echo_client.rs"

# record FIGURE SIDE VALUE
record() { echo "$3" >>"$tmp/data/$1.$2"; }

# The middle estimate of a criterion run, in ns.
criterion_ns() {
    sed -n 's/.*time: *\[[^ ]* [^ ]* \([0-9.]*\) \([a-zµ]*\) .*/\1 \2/p' | head -1 |
        awk '{ f = ($2 == "ps") ? 0.001 : ($2 == "ns") ? 1 : ($2 == "µs" || $2 == "us") ? 1000 : ($2 == "ms") ? 1e6 : 1e9; printf "%.3f\n", $1 * f }'
}

bench_run() {
    local side=$1 bench=$2 filter=$3 ns
    ns=$(taskset -c "$server_core" "$tmp/bin/$side-$bench" "$filter" --bench --noplot \
        --warm-up-time 1 --measurement-time "$BENCH_SECS" --discard-baseline 2>/dev/null | criterion_ns)
    [ -n "$ns" ] || { echo "no figure from $side $bench $filter"; exit 1; }
    record "$filter" "$side" "$ns"
}

# utime + stime of a process, in clock ticks.
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# Starts SIDE's echo server on a free port (another one if the port was
# taken meanwhile); sets $server_pid and $port.
start_server() {
    local side=$1 attempt i
    for attempt in 1 2 3 4 5; do
        port=$(( (RANDOM % 20000) + 30000 ))
        taskset -c "$server_core" "$tmp/bin/$side-echo_server" "127.0.0.1:$port" 2>/dev/null &
        server_pid=$!
        for i in $(seq 300); do
            "$tmp/bin/echo_client" "$port" probe && return 0
            kill -0 "$server_pid" 2>/dev/null || break # it exited: port taken
            sleep 0.05
        done
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=
    done
    echo "the $side echo server did not start"
    exit 1
}

echo_run() {
    local side=$1 port c0 c1 trips t0 t1
    start_server "$side"
    c0=$(cpu_ticks "$server_pid")
    t0=$(date +%s.%N)
    trips=$(taskset -c "$client_core" "$tmp/bin/echo_client" "$port" "$CONNS" "$SIZE" "$ECHO_SECS")
    t1=$(date +%s.%N)
    c1=$(cpu_ticks "$server_pid")
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=
    local hz
    hz=$(getconf CLK_TCK)
    record echo_round_trips_per_s "$side" "$(awk -v n="$trips" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f\n", n / (b - a) }')"
    record echo_server_cpu_us_per_trip "$side" "$(awk -v n="$trips" -v a="$c0" -v b="$c1" -v hz="$hz" 'BEGIN { printf "%.3f\n", (b - a) / hz * 1e6 / n }')"
}

one_side() {
    bench_run "$1" switch yield_round_trip
    bench_run "$1" switch sleep_zero
    bench_run "$1" spawn spawn_join_empty
    echo_run "$1"
}

for run in $(seq "$RUNS"); do
    # before, after; then after, before: alternated, and in turn first.
    if [ $((run % 2)) -eq 1 ]; then order="before after"; else order="after before"; fi
    for side in $order; do
        echo "== run $run/$RUNS: $side"
        one_side "$side"
    done
done

# median, min, max of a file of numbers
stats() { sort -g "$1" | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'; }

echo
echo "Watchdog cost: before = $before_rev, after = HEAD ($after_rev), $RUNS runs each, alternated"
echo "(benches pinned to core $server_core; echo: $CONNS connections x $SIZE B for ${ECHO_SECS}s, server on core $server_core, client on core $client_core)"
printf '%-30s %24s %24s %8s\n' figure "before: median (min-max)" "after: median (min-max)" ratio
for fig in yield_round_trip sleep_zero spawn_join_empty echo_round_trips_per_s echo_server_cpu_us_per_trip; do
    read -r bm bl bh < <(stats "$tmp/data/$fig.before")
    read -r am al ah < <(stats "$tmp/data/$fig.after")
    unit=ns
    case $fig in echo_round_trips_per_s) unit=/s ;; echo_server_cpu_us_per_trip) unit=us ;; esac
    printf '%-30s %24s %24s %8s\n' "$fig ($unit)" \
        "$(printf '%g (%g-%g)' "$bm" "$bl" "$bh")" \
        "$(printf '%g (%g-%g)' "$am" "$al" "$ah")" \
        "$(awk -v a="$am" -v b="$bm" 'BEGIN { printf "%.3f", a / b }')"
done
echo "(ratio: after/before of the medians; for round trips per second, higher is better)"
