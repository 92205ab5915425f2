#!/bin/bash
# Server CPU per echo round trip of several servers, interleaved: all run
# at once, pinned to core 0, and one load generator (pinned to core 1)
# moves its load from one to the next every WINDOW_MS, for ROUNDS rounds
# (see src/interleave.rs). Prints each server's median and its median
# per-round ratio to each other server.
#
#   benches/peers/cpu_il.sh WINDOW_MS ROUNDS CONNS SIZE BIN:IMP...
#
# e.g. `cpu_il.sh 200 30 1 64 OLD:fibra NEW:fibra NEW:epoll-floor`. The
# load comes from the first BIN. A server is named by its binary's base
# name and its kind (`OLD/fibra`). TWO=y: servers of two workers
# (`fibra-2w`, `epoll-floor-2w`) and a load generator of two workers, all
# unpinned on both cores, as `cpu_ab2.sh` runs them.
set -u
W=$1; R=$2; C=$3; S=$4; shift 4
ulimit -n "$(ulimit -Hn)"
LOAD=${1%%:*}
specs=(); pids=()
for arg in "$@"; do
  bin=${arg%%:*}; imp=${arg#*:}
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  if [ "${TWO:-n}" = y ]; then "$bin" echo-server "$imp" "$port" & pid=$!
  else taskset -c 0 "$bin" echo-server "$imp" "$port" & pid=$!; fi
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
  pids+=("$pid"); specs+=("$(basename "$bin")/$imp=$pid:$port")
done
sleep 0.2
[ "${TWO:-n}" = y ] && export IL_WORKERS=2
"$LOAD" echo-il "$W" "$R" "$C" "$S" "${specs[@]}"
kill "${pids[@]}"; wait 2>/dev/null
