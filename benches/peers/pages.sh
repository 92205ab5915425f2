#!/bin/bash
# The distinct pages of code and of data an echo server touches per round
# trip, traced with valgrind's lackey (slow: a few thousand trips).
#
#   benches/peers/pages.sh BIN IMP CONNS SIZE
#
# Runs `BIN echo-server IMP PORT` under `valgrind --tool=lackey
# --trace-mem=yes`, drives it for 3 s with `BIN echo-load`, and splits the
# trace of that load into windows of one round trip's instructions each;
# prints the median count of distinct 4 KiB pages per window. After each
# wake-up a server runs on cold TLBs, so on this VM the pages it touches
# per trip price it more than its instructions do.
set -u
BIN=$1; IMP=$2; C=$3; S=$4
log=$(mktemp /tmp/lackey.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
valgrind --tool=lackey --trace-mem=yes --log-file="$log" "$BIN" echo-server "$IMP" "$port" 2>/dev/null & pid=$!
for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
sleep 1
start=$(stat -c %s "$log")
out=$("$BIN" echo-load "$port" "$C" "$S")
kill $pid; wait $pid 2>/dev/null
python3 - "$log" "$start" "${out%% *}" <<'PY'
import statistics, sys
path, start, trips = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, 'rb') as f:
    f.seek(start)
    lines = f.readlines()
total = sum(1 for l in lines if l.startswith(b'I'))
window = max(1, total // trips)
code, data, counts, n = set(), set(), [], 0
for l in lines:
    kind = l[:2].strip()
    if kind not in (b'I', b'L', b'S', b'M'):
        continue
    try:
        addr = int(l[3:].split(b',')[0], 16)
    except ValueError:
        continue
    if kind == b'I':
        code.add(addr >> 12)
        n += 1
        if n == window:
            counts.append((len(code), len(data)))
            code, data, n = set(), set(), 0
    else:
        data.add(addr >> 12)
print(f"{trips} trips, {window} instructions a trip: "
      f"{statistics.median(c for c, _ in counts):.0f} code pages, "
      f"{statistics.median(d for _, d in counts):.0f} data pages a trip")
PY
rm -f "$log"
