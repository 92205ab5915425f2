#!/bin/bash
# tail_ab.sh OLD_BIN NEW_BIN [ROUNDS]: the two-worker echo tail of one server
# build against another, with the *old* build as the load generator for
# both, so what changes is the server alone. OLD_BIN and NEW_BIN are two
# fibra-peers binaries (e.g. built at two revisions: copy
# target/release/fibra-peers after `cargo build --release` at each).
# Each round runs fibra-2w from OLD, fibra-2w from NEW, tokio-2w and
# epoll-floor-2w (from OLD), 100 connections x 64 B, unpinned as echo2
# runs them; prints every run, then the median p50 and p99 per server.
set -eu
OLD=$1; NEW=$2; ROUNDS=${3:-6}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
one() { # SERVER_BIN IMP -> "trips p50 p99"
  local port; port=$(free_port)
  "$1" echo-server "$2" "$port" & local sp=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  local out; out=$("$OLD" echo-load2 "$port" 100 64)
  kill "$sp"; wait "$sp" 2>/dev/null || true
  # "N round trips, p50 X us, p99 Y us"
  echo "$out" | awk '{print $1, $5, $8}'
}
results=$(mktemp)
for r in $(seq "$ROUNDS"); do
  for cfg in "old-fibra-2w $OLD fibra-2w" "new-fibra-2w $NEW fibra-2w" "tokio-2w $OLD tokio-2w" "epoll-floor-2w $OLD epoll-floor-2w"; do
    set -- $cfg
    line="$1 $(one "$2" "$3")"
    echo "round $r: $line"
    echo "$line" >> "$results"
  done
done
echo "medians over $ROUNDS rounds (p50 us, p99 us; min-max of p99):"
med() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)], v[1], v[NR]}'; }
for name in old-fibra-2w new-fibra-2w tokio-2w epoll-floor-2w; do
  read -r p50 _ _ <<< "$(grep "^$name " "$results" | awk '{print $3}' | med)"
  read -r p99 lo hi <<< "$(grep "^$name " "$results" | awk '{print $4}' | med)"
  printf "  %-16s p50 %8s  p99 %9s  (%s-%s)\n" "$name" "$p50" "$p99" "$lo" "$hi"
done
rm -f "$results"
