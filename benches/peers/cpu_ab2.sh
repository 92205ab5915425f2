#!/bin/bash
# Server CPU per round trip of a two-worker echo server for one or more
# fibra-peers binaries (builds before and after a change), in alternated
# rounds, with the two-worker epoll floor of the first binary at the end of
# each round. Server and load generator run unpinned on both cores, as the
# `targets` two-worker rows run them; the load comes from the first binary,
# so that only the server changes.
#
#   benches/peers/cpu_ab2.sh ROUNDS CONNS SIZE IMP BIN...
#
# IMP: fibra-2w or fibra-shared-2w. Prints one line per round.
set -u
R=$1; C=$2; S=$3; IMP=$4; shift 4
LOAD=$1
one() { # bin imp -> us per trip
  local port pid t0 t1 out
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$1" echo-server "$2" "$port" & pid=$!
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
  sleep 0.2
  t0=$(awk '{print $14 + $15}' /proc/$pid/stat)
  out=$("$LOAD" echo-load2 "$port" "$C" "$S")
  t1=$(awk '{print $14 + $15}' /proc/$pid/stat)
  kill $pid; wait $pid 2>/dev/null
  awk -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v trips="${out%% *}" \
    'BEGIN { printf "%.2f", ticks / hz * 1e6 / trips }'
}
for r in $(seq "$R"); do
  line="$r"
  for b in "$@"; do line="$line $(basename "$b") $(one "$b" "$IMP")"; done
  echo "$line floor $(one "$LOAD" epoll-floor-2w)"
done
