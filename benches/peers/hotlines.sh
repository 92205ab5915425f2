#!/bin/bash
# The cache lines of one function's code that an echo round trip runs, and
# how densely: per 64-byte line of the function, how many of its
# instructions ran at least once every other trip. Lines where only a few
# did are a hot path that jumps over code that rarely runs (LLVM placed
# cold blocks in between): those are printed with the source each hot
# instruction came from, to find what to move out of line.
#
#   benches/peers/hotlines.sh BIN IMP CONNS FUNCTION
#
# e.g. `hotlines.sh target/release/fibra-peers fibra 1
#   'fibra::net::registration::Registration::transfer'` (FUNCTION: the
# demangled name as objdump -C prints it, without the angle brackets).
# The server runs under callgrind with `--dump-instr=yes`, as in
# `instructions.sh`; needs valgrind, objdump and addr2line. SPARSE=n: print
# the sources of lines with at most n hot instructions (4). BY_SOURCE=part
# of a path (e.g. `core/root.rs`): instead, the function's instructions a
# trip summed by the line of that file each was inlined from.
set -u
if [ $# -ne 4 ]; then
  echo "usage: $0 BIN IMP CONNS FUNCTION" >&2; exit 2
fi
command -v valgrind >/dev/null || { echo "hotlines.sh needs valgrind (Debian package valgrind)" >&2; exit 1; }
BIN=$1; IMP=$2; C=$3; FN=$4
out=$(mktemp /tmp/hotlines.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ulimit -n 4096
valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$out" "$BIN" echo-server "$IMP" "$port" 2>/dev/null & pid=$!
for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
sleep 1
load=$("$BIN" echo-load "$port" "$C" 64)
kill $pid; wait $pid 2>/dev/null
python3 - "$out" "$BIN" "${load%% *}" "$FN" <<'PY'
import collections, os, re, subprocess, sys
path, binp, trips, fn = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
# Self cost per instruction address. Positions are "instr line"; an
# address is absolute (0x...), relative (+n, -n) or the same (*); the line
# after a `calls=` line is a call's inclusive cost, not the caller's own.
cost, last, skip = collections.Counter(), 0, False
for line in open(path):
    if line.startswith('calls='):
        skip = True
        continue
    if not line[:1] or line[0] not in '0123456789+-*':
        continue
    parts = line.split()
    p = parts[0]
    if p.startswith('0x'):
        addr = int(p, 16)
    elif p[0] == '+':
        addr = last + int(p[1:])
    elif p[0] == '-':
        addr = last - int(p[1:])
    else:
        addr = last
    last = addr
    if skip:
        skip = False
        continue
    if len(parts) > 2:
        cost[addr] += int(parts[2])
dis = subprocess.run(['objdump', '-d', '--no-show-raw-insn', '-C', binp],
                     capture_output=True, text=True).stdout
cur, ins = None, []
for l in dis.split('\n'):
    m = re.match(r'^([0-9a-f]+) <(.*)>:$', l)
    if m:
        cur = m.group(2)
        continue
    m = re.match(r'^\s+([0-9a-f]+):\s+(.*)$', l)
    if m and cur == fn:
        ins.append((int(m.group(1), 16), m.group(2)))
if not ins:
    sys.exit(f"no function named {fn!r} in {binp}")
by_source = os.environ.get("BY_SOURCE")
if by_source:
    # Each instruction a trip ran, summed by the innermost line of a source
    # file whose path contains BY_SOURCE in its inline chain (an inlined
    # callee's instructions go to the line that called it there).
    ran = [a for a, _ in ins if cost.get(a, 0)]
    out = subprocess.run(['addr2line', '-i', '-a', '-e', binp],
                         input='\n'.join(hex(a) for a in ran),
                         capture_output=True, text=True).stdout.split('\n')
    chain, at = collections.defaultdict(list), None
    for l in out:
        if l.startswith('0x'):
            at = int(l, 16)
        elif l and at is not None:
            chain[at].append(l.split(' ')[0].split('/src/')[-1])
    by = collections.Counter()
    for a in ran:
        where = next((f for f in chain[a] if by_source in f), '(elsewhere)')
        by[where] += cost[a] / trips
    print(f"{fn}: {sum(by.values()):.0f} instructions a trip ({trips} trips), "
          f"by line of {by_source}:")
    for where, n in sorted(by.items()):
        if n >= 0.5:
            print(f"  {n:6.1f}  {where}")
    sys.exit(0)
lines = collections.defaultdict(list)
for a, text in ins:
    lines[a // 64].append((a, cost.get(a, 0) / trips, text))
hot = {k: v for k, v in lines.items() if any(c >= 0.5 for _, c, _ in v)}
n_hot = sum(1 for v in hot.values() for _, c, _ in v if c >= 0.5)
print(f"{fn}: {len(ins)} instructions in {len(lines)} lines; a trip runs {n_hot} of them "
      f"in {len(hot)} lines ({trips} trips)")
for k in sorted(hot):
    v = hot[k]
    n = sum(1 for _, c, _ in v if c >= 0.5)
    print(f"  line {k * 64:x}: {n:2}/{len(v)} hot")
    if n > int(os.environ.get("SPARSE", "4")):
        continue
    for a, c, text in v:
        if c < 0.5:
            continue
        src = subprocess.run(['addr2line', '-i', '-e', binp, hex(a)],
                             capture_output=True, text=True).stdout.split('\n')
        where = ' <- '.join(s.split(' ')[0].split('/src/')[-1] for s in src[:3] if s)
        print(f"      {a:x} {c:5.2f} {text[:40]:40} {where}")
PY
rm -f "$out"
