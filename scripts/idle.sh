#!/usr/bin/env bash
# idle.sh: vnicd's CPU use with no traffic (target: at most 1% of a core,
# alone and with a waiting client). Builds a namespaced
# veth testbed (PREFIX, default vidle), runs vnicd on its DUT end with XDP +
# AF_XDP and --idle adaptive (or IDLE=busy), and reads utime+stime from
# /proc/<pid>/stat over WINDOW seconds (default 10): first vnicd alone,
# then with an attached client (examples/rxcount, 4 queues) that waits in
# Queue.Wait. Prints CPU as a percentage of one core. Root only.
set -euo pipefail
cd "$(dirname "$0")/.."
P=${PREFIX:-vidle}
WINDOW=${WINDOW:-10}
IDLE=${IDLE:-adaptive}
[ "$(id -u)" -eq 0 ] || { echo "idle.sh needs root (namespaces, XDP, AF_XDP)"; exit 1; }
mkdir -p bin
go build -o bin/vnicd ./cmd/vnicd
go build -o bin/vnicctl ./cmd/vnicctl
go build -o bin/rxcount ./examples/rxcount
dir=$(mktemp -d)
sock=$dir/vnicd.sock
cleanup() {
	[ -n "${rpid:-}" ] && kill "$rpid" 2>/dev/null || true
	[ -n "${vpid:-}" ] && kill "$vpid" 2>/dev/null || true
	wait 2>/dev/null || true
	bin/vnicctl testbed down --prefix "$P" >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
bin/vnicctl testbed down --prefix "$P" >/dev/null 2>&1 || true
bin/vnicctl testbed up --prefix "$P" --queues 2 >/dev/null
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
measure() { # pid label
	local a b
	a=$(ticks "$1"); sleep "$WINDOW"; b=$(ticks "$1")
	awk -v a="$a" -v b="$b" -v hz="$hz" -v w="$WINDOW" -v l="$2" 'BEGIN { printf "%-40s %6.2f%% of a core (%d ticks of 1/%d s in %d s)\n", l, (b - a) / hz / w * 100, b - a, hz, w }'
}
echo "nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), kernel $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
ip netns exec "$P-dut" bin/vnicd run --source xsk --iface "${P}d0" --socket "$sock" --metrics-addr '' \
	--log-format json --log-level warn --emulator-cpu 0 --idle "$IDLE" >"$dir/vnicd.log" 2>&1 &
vpid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { cat "$dir/vnicd.log"; exit 1; }
sleep 1
measure "$vpid" "vnicd --idle $IDLE, no tenant, no traffic"
bin/rxcount --socket "$sock" --queues 4 --duration $((2 * WINDOW + 5))s --name idle-client >/dev/null &
rpid=$!
sleep 2
measure "$vpid" "vnicd, one waiting client (4 queues)" &
m1=$!
measure "$rpid" "the waiting client (rxcount, 4 queues)"
wait "$m1"
bin/vnicctl --socket "$sock" status | grep -E '^idle'
