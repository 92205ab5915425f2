#!/bin/bash
# The switch rows of issue 20's targets (`TARGETS=switch ... targets`) for
# one or more fibra-peers binaries (a build before a change and one after,
# say), in alternated rounds pinned to core 1: one line per round and
# binary, then the median of the rounds for each binary and row.
#
#   benches/peers/switch_ab.sh ROUNDS BIN...
#
# Each figure is what `targets` prints for the row: the median of its
# pairs, in ns (per round trip for the routine and the generator, per
# yield for `yield_now` and its floor). Alternating the builds lets the
# host's drift hit them alike; compare medians, not single rounds.
set -u
R=$1; shift
out=$(mktemp /tmp/switch_ab.XXXXXX)
for r in $(seq "$R"); do
  for b in "$@"; do
    TARGETS=switch taskset -c 1 "$b" targets 2>/dev/null | awk -v r="$r" -v b="$(basename "$b")" '
      /switch routine alone/   { row = "routine" }
      /MXCSR stored, never/    { row = "routine-floor" }
      /Generator next/         { row = "generator" }
      /yield_now, per yield/   { row = "yield" }
      /the routine, two call/  { row = "yield-floor" }
      row != "" {
        for (i = 1; i <= NF; i++) if ($(i + 1) ~ /^ns/) { print r, b, row, $i; break }
        row = ""
      }' | tee -a "$out"
  done
done
echo "== medians of $R rounds (ns)"
sort -k2,2 -k3,3 -k4,4n "$out" | awk '
  { key = $2 " " $3; v[key, ++n[key]] = $4 }
  END {
    for (key in n) {
      c = n[key]
      m = (c % 2) ? v[key, (c + 1) / 2] : (v[key, c / 2] + v[key, c / 2 + 1]) / 2
      printf "%-40s %8.2f  (%d rounds, %.2f-%.2f)\n", key, m, c, v[key, 1], v[key, c]
    }
  }' | sort
rm -f "$out"
