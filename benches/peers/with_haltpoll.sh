#!/bin/bash
# Runs a command with the guest kernel's halt-polling on, then puts the old
# setting back (even if the command fails or is interrupted).
#
#   [NS=200000] benches/peers/with_haltpoll.sh COMMAND [ARG...]
#
# e.g. `TARGETS=echo,echo2 with_haltpoll.sh target/release/fibra-peers
# targets`. On this VM an idle virtual CPU halts and the host is slow to
# run it again, so a wake-up across the two CPUs (every echo round trip)
# cost 37 µs in its slow hours; polling for NS ns before halting brings it
# to 7–8 µs. The polling is idle time, charged to no process. Needs root
# and the haltpoll cpuidle driver; without them it says so and runs the
# command as it is.
set -u
knob=/sys/module/haltpoll/parameters/guest_halt_poll_ns
if [ -w "$knob" ]; then
  old=$(cat "$knob")
  trap 'echo "$old" > "$knob"' EXIT
  trap 'exit 130' INT TERM
  echo "${NS:-200000}" > "$knob"
  echo "with_haltpoll.sh: guest_halt_poll_ns ${NS:-200000} (was $old)" >&2
else
  echo "with_haltpoll.sh: cannot set $knob (not root, or no haltpoll driver): running without" >&2
fi
"$@"
