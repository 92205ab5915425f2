#!/bin/bash
# Instructions a round trip of an echo server, counted by valgrind's
# callgrind: deterministic, so a change of a few dozen instructions shows
# even when this VM's timings swing. The server runs under callgrind; the
# load (`echo-load`, 3 s, unpinned) runs natively; the count is the
# server's whole run (start-up included: about a million instructions,
# under 1% at these trip counts) over the trips the load made.
#
#   benches/peers/instructions.sh BIN IMP CONNS [SIZE]
#
# e.g. `instructions.sh target/release/fibra-peers fibra-2w 1`. With
# KEEP=1 the callgrind file is kept and named, for `callgrind_annotate`.
set -u
if [ $# -lt 3 ]; then
  echo "usage: $0 BIN IMP CONNS [SIZE]" >&2; exit 2
fi
command -v valgrind >/dev/null || { echo "instructions.sh needs valgrind (Debian package valgrind)" >&2; exit 1; }
BIN=$1; IMP=$2; C=$3; S=${4:-64}
out=$(mktemp /tmp/instructions.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ulimit -n 4096
valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" echo-server "$IMP" "$port" 2>/dev/null & pid=$!
for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
sleep 1
load=$("$BIN" echo-load "$port" "$C" "$S")
kill $pid; wait $pid 2>/dev/null
total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
trips=${load%% *}
echo "$(basename "$BIN") $IMP $C x $S B: $trips trips, $(awk -v t="$total" -v n="$trips" 'BEGIN { printf "%.0f", t / n }') instructions a trip"
if [ "${KEEP:-0}" = 1 ]; then echo "callgrind file: $out"; else rm -f "$out"; fi
