#!/bin/bash
# Server CPU per round trip of fibra and of the epoll floor, for one or more
# fibra-peers binaries (a build before a change and one after, say), in
# alternated rounds: one line per round and binary, with fibra / floor.
#
#   [IMP=fibra-shared] benches/peers/cpu_ab.sh ROUNDS CONNS SIZE BIN...
#
# IMP: the fibra server kind (`fibra` unless set).
# Each run starts `BIN echo-server IMP PORT` pinned to core 0, drives it
# for 3 s with `BIN echo-load PORT CONNS SIZE` pinned to core 1, and reads
# the server's utime + stime (clock ticks) from /proc.
set -u
R=$1; C=$2; S=$3; shift 3
one() { # bin imp -> us per trip
  local port pid t0 t1 out
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  taskset -c 0 "$1" echo-server "$2" "$port" & pid=$!
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
  sleep 0.2
  t0=$(awk '{print $14 + $15}' /proc/$pid/stat)
  out=$(taskset -c 1 "$1" echo-load "$port" "$C" "$S")
  t1=$(awk '{print $14 + $15}' /proc/$pid/stat)
  kill $pid; wait $pid 2>/dev/null
  awk -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v trips="${out%% *}" \
    'BEGIN { printf "%.2f", ticks / hz * 1e6 / trips }'
}
for r in $(seq "$R"); do
  for b in "$@"; do
    f=$(one "$b" "${IMP:-fibra}"); e=$(one "$b" epoll-floor)
    echo "$r $(basename "$b") fibra $f floor $e ratio $(awk -v f="$f" -v e="$e" 'BEGIN { printf "%.3f", f / e }')"
  done
done
