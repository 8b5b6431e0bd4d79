#!/usr/bin/env bash
# make demo: build, run vnicd with real traffic, show its counters.
#
# As root on Linux (with network namespaces, BPF and AF_XDP): build a
# namespaced veth testbed, start vnicd on the DUT end with XDP + AF_XDP,
# attach a receiving application (examples/rxcount), send ~10 s of real UDP
# traffic with trafgen from the peer namespace, show `vnicctl watch`, the
# per-ring table and every counter, and tear everything down.
# Anywhere else (or with SYNTH=1): run vnicd's synthetic-traffic mode and
# say so. Ctrl-C (or SIGTERM) stops the demo, removes everything it created
# and exits with 130 (143).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
# The version --version prints, as make build stamps it (the Makefile's
# VERSION when make runs this); safe.directory lets root's git describe a
# clone another user owns (sudo make demo).
VERSION=${VERSION:-$(git -c safe.directory='*' describe --tags --always --dirty 2>/dev/null || true)}
# Without cgo, as make image builds them: nothing here needs it, and a cold
# build then compiles no C (runtime/cgo, net's and os/user's cgo parts).
export CGO_ENABLED=0
go build -ldflags "${VERSION:+-X github.com/vnic/vnic/internal/buildinfo.Override=$VERSION}" -o bin/ ./cmd/vnicd ./cmd/vnicctl ./examples/rxcount
if [ "${1:-}" = "--build-only" ]; then # build what the demo runs, and stop
	exit 0
fi

# Everything the demo creates: the processes below, the temporary directory
# (control socket, trafgen's configuration, rxcount's output) and, as root,
# the testbed. cleanup removes all of it, on every exit.
dir=$(mktemp -d)
vpid= rpid= tpid= P=
cleanup() {
	for p in $cpid $tpid $rpid $vpid; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [ -n "$P" ]; then bin/vnicctl testbed down --prefix "$P" >/dev/null 2>&1 || true; fi
	rm -rf "$dir"
}
# interrupted: clean up, say so in one line and stop with the signal's
# status (no report follows: the counters would only show the teardown).
interrupted() {
	trap - EXIT INT TERM
	cleanup
	echo "== demo interrupted: everything it created (vnicd, its tenant${P:+, the testbed $P}, temporary files) is removed" >&2
	exit "$1"
}
trap cleanup EXIT
trap 'interrupted 130' INT
trap 'interrupted 143' TERM
# step runs a command the demo waits for in the background and waits for
# it: bash skips the INT trap when a foreground command catches SIGINT
# and exits normally (vnicctl watch does), but wait returns at once.
cpid=
step() {
	"$@" &
	cpid=$!
	local rc=0
	wait "$cpid" || rc=$?
	cpid=
	return "$rc"
}

synthetic() {
	echo "== synthetic-traffic mode ($1): vnicd generates frames itself; the tenant attaches over the control socket"
	sock=$dir/synth.sock
	bin/vnicd run --source synth --rate 2000000 --socket "$sock" --metrics-addr '' --log-format console --emulator-cpu "$ecpu" &
	vpid=$!
	for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
	bin/rxcount --socket "$sock" --queues 2 --duration 8s &
	rpid=$!
	step sleep 1
	step bin/vnicctl --socket "$sock" watch --count 2 --interval 2s || true
	echo "== where frames were lost over 2 s, and why"
	step bin/vnicctl --socket "$sock" diagnose --interval 2s || true
	wait $rpid || true
	rpid=
	step bin/vnicctl --socket "$sock" rings --all
	kill $vpid; wait $vpid 2>/dev/null || true
	vpid=
}

ecpu=${EMULATOR_CPU:-0}
[ "$(nproc)" -lt 2 ] && ecpu=-1
if [ -n "${SYNTH:-}" ]; then
	synthetic "SYNTH is set"
	exit 0
fi
if [ "$(uname -s)" != Linux ] || [ "$(id -u)" -ne 0 ]; then
	synthetic "not root on Linux: no namespaces, XDP or AF_XDP here"
	exit 0
fi
scripts/deps.sh iproute2 ethtool netsniff-ng
if ! command -v trafgen >/dev/null; then
	synthetic "trafgen (netsniff-ng) is not installed and could not be installed"
	exit 0
fi

P=${PREFIX:-vdemo} # PREFIX=name keeps two demos (or a demo and a test) apart
sock=$dir/vnicd.sock
bin/vnicctl testbed down --prefix "$P" >/dev/null 2>&1 || true
if ! bin/vnicctl testbed up --prefix "$P" --queues 2; then
	synthetic "could not build the namespaced testbed"
	exit 0
fi
dut="$P-dut"; peer="$P-p0"; dif="${P}d0"; pif="${P}p0"
dmac=$(ip netns exec "$dut" cat "/sys/class/net/$dif/address")
smac=$(ip netns exec "$peer" cat "/sys/class/net/$pif/address")

# What the demo offers: trafgen's -b shaper is per second: it sends each
# second's RATE frames back to back at its full speed (0.5-1.7 Mpps here)
# and then sleeps for the rest of the second. "100 kpps" is 10 bursts of
# 100,000 frames, so the receiver must keep up with trafgen's peak rate or
# hold a burst's backlog in its rings. vnicd and the application run at
# their defaults: vnicd sizes its AF_XDP rings and the tenant's rings from
# the link's rate and --latency-budget (docs/operations.md, Ring sizing).
# VNICD_ARGS and RXCOUNT_ARGS add flags to either.
RATE=${RATE:-100000}
FRAMES=${FRAMES:-1000000}
echo "== real traffic: vnicd takes frames from $dif (netns $dut) through XDP + AF_XDP"
# shellcheck disable=SC2086 # VNICD_ARGS and RXCOUNT_ARGS are word lists
ip netns exec "$dut" bin/vnicd run --source xsk --iface "$dif" --socket "$sock" --metrics-addr '' \
	--log-format console --emulator-cpu "$ecpu" ${VNICD_ARGS:-} &
vpid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
if ! [ -S "$sock" ]; then
	echo "vnicd did not start (above is why); falling back"
	kill "$vpid" 2>/dev/null || true
	wait "$vpid" 2>/dev/null || true
	vpid=
	synthetic "vnicd could not attach to the testbed"
	exit 0
fi
# The tenant claims UDP 9000-9099 (where trafgen sends): XDP takes only that
# from the interface, everything else still reaches the kernel.
# It runs until trafgen is done and the last frames are in (SIGINT below).
# shellcheck disable=SC2086
bin/rxcount --socket "$sock" --queues 4 --duration 0 --name demo-app --ports 9000-9099 ${RXCOUNT_ARGS:-} >"$dir/rxcount.out" &
rpid=$!
step sleep 1
cat >"$dir/udp.cfg" <<CFG
{ eth(da=$dmac, sa=$smac), ipv4(saddr=198.18.1.2, daddr=198.18.1.1, ttl=64), udp(sport=dinc(10000, 10063), dport=9000), fill(0x41, 18) }
CFG
echo "== trafgen sends $FRAMES 64-byte UDP frames (64 flows) from netns $peer, $RATE a second"
echo "   (trafgen -b: each second's frames leave in one burst at its full speed); vnicd and the"
echo "   tenant at their defaults"
t0=$(date +%s%N)
ip netns exec "$peer" trafgen --dev "$pif" --conf "$dir/udp.cfg" -n "$FRAMES" -b "${RATE}pps" --cpus 1 -Q -C >/dev/null 2>&1 &
tpid=$!
step bin/vnicctl --socket "$sock" watch --count 4 --interval 2s || true
echo "== where frames were lost over the last 2 s of traffic, and why"
step bin/vnicctl --socket "$sock" diagnose --interval 2s || true
wait $tpid || true
tpid=
t1=$(date +%s%N)
step sleep 1 # the last frames reach the tenant
kill -INT "$rpid" 2>/dev/null || true
wait $rpid || true
rpid=
cat "$dir/rxcount.out"
got=$(sed -n 's/^received \([0-9]*\) packets.*/\1/p' "$dir/rxcount.out")
echo "== trafgen took $(((t1 - t0) / 1000000)) ms for $FRAMES frames; the tenant received ${got:-?} of them"
if [ "${got:-0}" = "$FRAMES" ]; then
	echo "== every frame delivered: no drop anywhere (XDP, AF_XDP, vnicd)"
else
	echo "== $((FRAMES - ${got:-0})) frames not delivered: the counters below say where they were dropped"
fi
echo
echo "== per-ring table after the run (the application has detached; its counters are kept)"
step bin/vnicctl --socket "$sock" rings --all --legend
echo
echo "== XDP and AF_XDP statistics next to the engine's"
bin/vnicctl --socket "$sock" counters --nonzero | sed -n '1,40p'
kill "$vpid"; wait "$vpid" 2>/dev/null || true
vpid=
echo "== done: testbed removed, vnicd stopped; no XDP program stays attached (bpf_link)"
