#!/bin/bash
# Server user and system CPU time per echo round trip, for each server kind
# of one fibra-peers binary, in alternated rounds.
#
#   benches/peers/ustime.sh ROUNDS CONNS SIZE BIN IMP...
#
# IMP: fibra, tokio, epoll-floor, ... (see `echo-server`). Each run starts
# `BIN echo-server IMP PORT` pinned to core 0 and drives it for 3 s with
# `echo-load` pinned to core 1 (from $LOAD if set, else BIN, so that two
# builds can be compared under one client); utime and stime come from
# /proc in clock ticks, so the split between them is sampled (a few
# percent), their sum is not.
set -u
R=$1; C=$2; S=$3; BIN=$4; shift 4
for _ in $(seq "$R"); do
  for IMP in "$@"; do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    taskset -c 0 "$BIN" echo-server "$IMP" "$port" & pid=$!
    for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
    sleep 0.2
    read -r u0 s0 < <(awk '{print $14, $15}' /proc/$pid/stat)
    out=$(taskset -c 1 "${LOAD:-$BIN}" echo-load "$port" "$C" "$S")
    read -r u1 s1 < <(awk '{print $14, $15}' /proc/$pid/stat)
    kill $pid; wait $pid 2>/dev/null
    awk -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v t="${out%% *}" -v imp="$IMP" -v hz="$(getconf CLK_TCK)" \
      'BEGIN { k = 1e9 / hz / t; printf "%-14s user %5.0f  sys %5.0f  total %5.0f ns/trip\n", imp, u * k, s * k, (u + s) * k }'
  done
done
