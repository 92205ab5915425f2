#!/bin/bash
# A million fresh fibers, for one or more fibra-peers binaries (a build
# before a change and one after, say), in alternated rounds: one line per
# round with each binary's seconds, its ratio to the first binary's and
# the child's user time (from /usr/bin/time, Debian package `time`).
#
#   [KIND=fibra] [N=1000000] benches/peers/million_ab.sh ROUNDS BIN...
#
# KIND: what each BIN's child runs (`fibra`, `guarded`, `populated`, see
# src/million.rs). Before every measured child a throwaway one faults and
# frees 1.3 M pages, as `-- targets` does: this VM's host backs guest
# memory lazily, and a child that finds it unbacked pays up to 3x.
set -u
R=$1; shift
n=${N:-1000000}
t=$(mktemp /tmp/million_ab.XXXXXX)
for r in $(seq "$R"); do
  line="$r"; first=""
  for b in "$@"; do
    "$b" million-child pages $((n * 13 / 10)) >/dev/null
    s=$(/usr/bin/time -f %U -o "$t" "$b" million-child "${KIND:-fibra}" "$n" | awk '{print $1}')
    [ -z "$first" ] && first=$s
    line="$line $(basename "$b") $(printf %.3f "$s") ($(awk -v s="$s" -v f="$first" 'BEGIN { printf "%.3f", s / f }'), user $(cat "$t") s)"
  done
  echo "$line"
done
rm -f "$t"
