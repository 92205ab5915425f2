#!/bin/bash
# System calls a round trip of an echo server, by call, counted with the
# kernel's tracepoints (`perf stat -e raw_syscalls:sys_enter` and one
# `syscalls:sys_enter_NAME` per call below), which need no hardware
# counters: a count, so it holds when this VM's timings swing. When a
# server's CPU a trip is mostly system time, this says whether a server
# makes more calls than the epoll floor, or the same calls with less in
# each (fewer events a wait).
#
#   benches/peers/syscalls.sh BIN CONNS SIZE IMP...
#
# e.g. `syscalls.sh target/release/fibra-peers 1000 64 fibra epoll-floor`.
# Two-worker kinds (`*-2w`) are driven by `echo-load2` and run unpinned, as
# `cpu_ab2.sh` runs them; the others pinned, the server to core 0 and
# `echo-load` to core 1. Needs perf and read access to tracefs (root, or
# kernel.perf_event_paranoid at -1).
set -u
if [ $# -lt 4 ]; then
  echo "usage: $0 BIN CONNS SIZE IMP..." >&2; exit 2
fi
command -v perf >/dev/null || { echo "syscalls.sh needs perf (Debian package linux-perf)" >&2; exit 1; }
BIN=$1; C=$2; S=$3; shift 3
CALLS="epoll_wait epoll_pwait recvfrom sendto read write epoll_ctl futex"
events="-e raw_syscalls:sys_enter"
for c in $CALLS; do events="$events -e syscalls:sys_enter_$c"; done
ulimit -n 4096
printf "%-16s %8s %7s" imp trips all
for c in $CALLS; do printf " %10s" "$c"; done
echo
for imp in "$@"; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  case $imp in
    *-2w) pin=""; load=echo-load2; lpin="" ;;
    *) pin="taskset -c 0"; load=echo-load; lpin="taskset -c 1" ;;
  esac
  $pin "$BIN" echo-server "$imp" "$port" & pid=$!
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
  sleep 0.2
  stat=$(mktemp /tmp/syscalls.XXXXXX)
  # shellcheck disable=SC2086
  perf stat -x, $events -p "$pid" -o "$stat" & perf=$!
  sleep 0.2
  out=$($lpin "$BIN" $load "$port" "$C" "$S")
  kill -INT $perf; wait $perf 2>/dev/null
  kill $pid; wait $pid 2>/dev/null
  trips=${out%% *}
  printf "%-16s %8s" "$imp" "$trips"
  awk -F, -v trips="$trips" -v calls="all $CALLS" '
    /sys_enter/ { n = $3; sub(/.*sys_enter_?/, "", n); if (n == "") n = "all"; v[n] = $1 }
    END { k = split(calls, c, " "); for (i = 1; i <= k; i++) printf " %*.3f", (i == 1 ? 7 : 10), v[c[i]] / trips; print "" }' "$stat"
  rm -f "$stat"
done
