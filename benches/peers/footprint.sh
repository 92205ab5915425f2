#!/bin/bash
# What an echo server touches per round trip: instructions, distinct cache
# lines of code and of data, and the code lines by function. Traced with
# valgrind's lackey, under a load that sends one request at a time, turning
# over CONNS connections (so each trip is one event, one wake-up, as with a
# thousand connections at full speed, and valgrind's slowness does not batch
# the events).
#
#   benches/peers/footprint.sh BIN IMP CONNS SIZE TRIPS
#
# e.g. `footprint.sh target/release/fibra-peers fibra-shared 1000 64 3000`.
# After each wait the kernel has left little of a server's code and data in
# the caches, so these lines are what a trip pays for on top of its
# syscalls; the epoll floor touches 18 in all. With many connections, the
# data lines a trip touches that no trip of the last 50 touched (a
# connection's own state: its stack, its records) are the ones that come
# from far away: printed as "cold", with what first touched each (and,
# with COLD_PCS=n, the n instructions that first touch the most of them;
# with STACK_SLOT=266240, the fibers' stack lines by depth below the top;
# with DATA_BY=n, every data line a trip by where it is and by the n
# functions that touch the most of them first, cold or not, and the data
# pages by where they are).
set -u
if [ $# -ne 5 ]; then
  echo "usage: $0 BIN IMP CONNS SIZE TRIPS" >&2; exit 2
fi
command -v valgrind >/dev/null || { echo "footprint.sh needs valgrind (Debian package valgrind)" >&2; exit 1; }
BIN=$1; IMP=$2; C=$3; S=$4; T=$5
dir=$(mktemp -d /tmp/footprint.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ulimit -n 4096
valgrind --tool=lackey --trace-mem=yes --log-file="$dir/trace" "$BIN" echo-server "$IMP" "$port" 2>/dev/null & pid=$!
for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
sleep 1
# The client: connects, warms every connection twice, says so (file
# `warm`), waits for `go`, then runs the traced trips.
python3 - "$port" "$C" "$S" "$T" "$dir" <<'PY' & client=$!
import os, socket, sys, time
port, n, size, trips, d = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
socks = [socket.create_connection(('127.0.0.1', port)) for _ in range(n)]
for s in socks:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
msg = b'x' * size
def run(k):
    for t in range(k):
        s = socks[t % n]
        s.sendall(msg)
        got = 0
        while got < size:
            got += len(s.recv(65536))
run(2 * n)
open(f'{d}/warm', 'w').close()
while not os.path.exists(f'{d}/go'):
    time.sleep(0.05)
run(trips)
PY
while [ ! -e "$dir/warm" ]; do sleep 0.1; done
sleep 0.3
start=$(stat -c %s "$dir/trace")
touch "$dir/go"
wait $client
sleep 0.3
end=$(stat -c %s "$dir/trace")
cp /proc/$pid/maps "$dir/maps"
kill $pid; wait $pid 2>/dev/null
nm -n --defined-only "$BIN" > "$dir/syms"
python3 - "$dir" "$BIN" "$start" "$end" "$T" "${COLD_PCS:-0}" "${STACK_SLOT:-0}" "${DATA_BY:-0}" <<'PY'
import bisect, collections, subprocess, sys
d, binp, start, end, trips = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
exe = binp.split('/')[-1]
maps = []
for l in open(f'{d}/maps'):
    p = l.split()
    lo, hi = (int(x, 16) for x in p[0].split('-'))
    maps.append((lo, hi, p[5].split('/')[-1] if len(p) > 5 else f'[anon {p[1]}]'))
base = min(lo for lo, hi, name in maps if name == exe)
syms = [(int(a, 16) + base, n) for a, t, n in (l.rstrip('\n').split(' ', 2) for l in open(f'{d}/syms')) if t in 'tTwW']
addrs = [a for a, _ in syms]
def region(a):
    return next((name for lo, hi, name in maps if lo <= a < hi), '?')
with open(f'{d}/trace', 'rb') as f:
    f.seek(start)
    lines = f.read(end - start).split(b'\n')
window = sum(1 for l in lines if l[:1] == b'I') // trips
code, data, n, wins = set(), set(), 0, 0
ccount, dcount = collections.Counter(), collections.Counter()
# Cold lines: the window each data line was last touched in, and the
# instruction that first touched it in this window.
last, first, pc, cold, coldby = {}, {}, 0, 0, collections.Counter()
databy, datawhere, pagewhere = collections.Counter(), collections.Counter(), collections.Counter()
K = 50
cpages = dpages = 0
data_top = int(sys.argv[8])
# STACK_SLOT=bytes: fibers' stacks are the mappings made of whole slots of
# this size (a stack and its guard page: 266240 for the default 256 KiB),
# each with its top at the slot's end; their lines are counted by how far
# below the top they lie.
slot = int(sys.argv[7])
stacks = [(lo, hi) for lo, hi, name in maps
          if slot and name.startswith('[anon') and (hi - lo) % slot == 0 and hi - lo >= 8 * slot]
stk, stk_cold = collections.Counter(), collections.Counter()
def from_top(a):
    for lo, hi in stacks:
        if lo <= a < hi:
            return (slot - (a - lo) % slot - 1) // 64
    return None
for l in lines:
    kind = l[:2].strip()
    if kind not in (b'I', b'L', b'S', b'M'):
        continue
    try:
        a = int(l[3:].split(b',')[0], 16)
    except ValueError:
        continue
    if kind == b'I':
        code.add(a >> 6)
        pc = a
        n += 1
        if n == window:
            for line in data:
                is_cold = wins - last.get(line, -K - 1) > K
                if is_cold:
                    cold += 1
                    coldby[first[line]] += 1
                last[line] = wins
                databy[first[line]] += 1
                if data_top:
                    datawhere[line] += 1
                if slot:
                    d = from_top(line << 6)
                    if d is not None:
                        stk[d] += 1
                        stk_cold[d] += is_cold
            first = {}
            ccount.update(code); dcount.update(data); wins += 1
            cpages += len({line >> 6 for line in code})
            pages = {line >> 6 for line in data}
            dpages += len(pages)
            if data_top:
                pagewhere.update(pages)
            code, data, n = set(), set(), 0
    else:
        if a >> 6 not in data:
            first[a >> 6] = pc
        data.add(a >> 6)
wins = max(wins, 1)
print(f"{exe}: {window} instructions, {sum(ccount.values()) / wins:.1f} code lines "
      f"({cpages / wins:.1f} pages), {sum(dcount.values()) / wins:.1f} data lines "
      f"({dpages / wins:.1f} pages) a trip")
def fname(a):
    r = region(a)
    i = bisect.bisect_right(addrs, a) - 1
    return syms[i][1] if r == exe and i >= 0 else r
def table(title, counts, key, top):
    """Prints `counts` (address or line -> count over all trips) summed by
    `key` of each, the `top` largest a trip, names demangled."""
    by = collections.Counter()
    for k, c in counts.items():
        by[key(k)] += c
    rows = by.most_common(top)
    dem = subprocess.run(['c++filt'], input='\n'.join(n for n, _ in rows),
                         capture_output=True, text=True).stdout.split('\n')
    print(title)
    for (_, c), pretty in zip(rows, dem):
        print(f"  {c / wins:5.1f}  {pretty[:100]}")
table("code lines a trip, by function:", ccount, lambda line: fname(line << 6), 15)
table(f"cold data lines a trip (none of the last {K} trips touched them): {cold / wins:.1f}, "
      "by the function that touched each first:", coldby, fname, 10)
if data_top:
    dsyms = sorted((int(a, 16) + base, n) for a, t, n in
                   (l.rstrip('\n').split(' ', 2) for l in open(f'{sys.argv[1]}/syms'))
                   if t in 'bBdDrRvV')
    daddrs = [a for a, _ in dsyms]
    def where(line):
        a = line << 6
        if slot and from_top(a) is not None:
            return "a fiber's stack"
        r = region(a)
        if r.startswith('[anon'):
            # Which anonymous mapping, by its size and start (the main
            # thread's stack, the heap and ours are all anonymous under
            # valgrind).
            lo, hi = next((lo, hi) for lo, hi, name in maps if lo <= a < hi)
            return f"{r} of {(hi - lo) >> 10} KiB at {lo:#x}"
        if r != exe:
            return r
        i = bisect.bisect_right(daddrs, a + 63) - 1
        return dsyms[i][1] if i >= 0 else exe
    table(f"data lines a trip, by where they are (the top {data_top}; in the binary, "
          "by the last symbol at or before the line's end):", datawhere, where, data_top)
    table(f"data pages a trip, by where they are (the top {data_top}):",
          pagewhere, lambda page: where(page << 6), data_top)
    table(f"data lines a trip, by the function that touched each first (the top {data_top}):",
          databy, fname, data_top)
if slot:
    print(f"stack lines a trip: {sum(stk.values()) / wins:.1f}, cold {sum(stk_cold.values()) / wins:.1f}; "
          "by line below the stack's top (touched / cold, lines touched in at least a tenth of the trips):")
    for d in sorted(stk):
        if stk[d] / wins >= 0.1:
            print(f"  {d:5} ({d * 64:6} B)  {stk[d] / wins:4.2f} / {stk_cold[d] / wins:4.2f}")
top = int(sys.argv[6])
if top:
    # Each cold line's first toucher, one instruction at a time, with its
    # text: a stack slot shows as `(%rsp)`, a push or a call.
    print(f"the {top} instructions that first touch the most cold lines:")
    for a, c in coldby.most_common(top):
        r = region(a)
        i = bisect.bisect_right(addrs, a) - 1
        if r != exe or i < 0:
            print(f"  {c / wins:5.2f}  {r}")
            continue
        off = a - base
        dis = subprocess.run(['objdump', '-d', '--no-show-raw-insn', '-C', binp,
                              f'--start-address={off:#x}', f'--stop-address={off + 16:#x}'],
                             capture_output=True, text=True).stdout
        text = next((l.split(':', 1)[1].strip() for l in dis.split('\n')
                     if l.strip().startswith(f'{off:x}:')), '?')
        name = subprocess.run(['c++filt', syms[i][1]], capture_output=True, text=True).stdout.strip()
        print(f"  {c / wins:5.2f}  {name[:60]}+{a - syms[i][0]:#x}  {text}")
PY
rm -rf "$dir"
