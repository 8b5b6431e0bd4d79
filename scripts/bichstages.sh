#!/bin/bash
# Stage breakdown of the vNIC bi-channel ping-pong (docs/bichannel.md,
# "Where a round trip goes"): runs BenchmarkBichannelTestbed's vNIC
# variant with BICH_STAGES=1 and records kernel tracepoints (perf, CLOCK_MONOTONIC,
# the clock of the stamps) while the stamped ping-pong runs, then joins them.
#
#   sudo scripts/bichstages.sh [OUT]        # OUT defaults to /tmp/bichstages
#
# Environment: BICH_VNICD_ARGS, BICH_VNIC_SPIN_US, BICH_GOMAXPROCS and the
# other BICH_* knobs of the benchmark pass through. Needs perf and python3.
set -euo pipefail
out=${1:-/tmp/bichstages}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$(dirname "$out")"
go test -c -o "$out.test" "$root/tests"
cd "$root/tests"
BICH_VARIANTS=bichannel BICH_STAGES=1 BICH_STAGES_FILE="$out.st" BICH_FIG16=0 BICH_REPS=1 \
  BICH_PING_MS=${BICH_PING_MS:-1500} BICH_PIPE_MS=200 BICH_BATCHES=100 \
  "$out.test" -test.run '^$' -test.bench BichannelTestbed -test.benchtime 1x -test.v > "$out.log" 2>&1 &
bp=$!
srv=""
for _ in $(seq 1 1200); do # bounded: 60 s for the testbed and the server to come up
  srv=$(pgrep -f "^$out.test -test.run \^TestHelperBichannelServer" || true)
  [ -n "$srv" ] && break
  sleep 0.05
done
[ -n "$srv" ] || { echo "server process did not start; see $out.log"; kill "$bp"; exit 1; }
# The plain ping-pong runs BICH_PING_MS, then the stamped one: record inside it.
sleep "$(awk -v ms="${BICH_PING_MS:-1500}" 'BEGIN{print ms/1000 + 0.2}')"
perf record -k CLOCK_MONOTONIC -a -o "$out.data" \
  -e syscalls:sys_enter_sendto -e syscalls:sys_exit_sendto -e xdp:xdp_redirect \
  -e sched:sched_wakeup -e sched:sched_switch -- sleep 1 > /dev/null 2>&1
wait "$bp"
perf script --ns -i "$out.data" -F comm,tid,pid,cpu,time,event,trace > "$out.txt" 2> /dev/null
vnicd=$(grep -o 'vnicd (pid [0-9]*' "$out.log" | grep -o '[0-9]*$')
server=$(grep -o 'server (pid [0-9]*' "$out.log" | grep -o '[0-9]*$')
grep -E 'stages|ping-pong' "$out.log" | sed 's/.*_test.go:[0-9]*: //' | cut -c1-200
python3 "$root/scripts/bichstages.py" "$out.txt" "$out.st.bichannel.0" "$vnicd" "$server" "$bp"
