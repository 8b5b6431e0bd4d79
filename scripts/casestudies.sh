#!/usr/bin/env bash
# The two database case studies of the bi-channel paper on a
# 4-host namespaced testbed (hosts 0-2 run the shuffle; the KV's primary is
# host 0, its secondaries hosts 1-2, its load client host 3), each host with
# its own vnicd. The shuffle runs over the bi-channel (kernel UDP fast path,
# then the vNIC fast path through each host's vnicd) and over kernel TCP,
# interleaved in one run (MTU 9000: also with 8900-byte messages); the KV
# over the bi-channel with hot-path acknowledgements (hot), with its
# acknowledgements in TCP batches (bi) and over kernel TCP (tcp), on the
# UDP fast path, then on the vNIC one. Writes CSVs and plots to bench/, or
# to FIGS (FIGS=docs: the figures docs/shuffle.md and docs/kv.md show);
# SMOKE=1: a brief run into bench/; SKIP_SHUFFLE=1: the KV only.
# Every comparison gives each transport the same host CPUs: every host and
# the KV's load client on HOST_CPUS (default 1), each vnicd (the NIC) on
# NIC_CPUS (default 0); kernel TCP also runs on both (tcp-both, its best
# case, the reference line). PLACE=none pins nothing.
# Root only (network namespaces, XDP).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${FIGS:-bench}
prefix="cs$(($$ % 10000))"
if [ "${SMOKE:-0}" = 1 ]; then
	out=bench
	rows=20000 runs=1 rates=2000,8000 dur=500ms
else
	rows=${SHUFFLE_ROWS:-25000,100000,400000} runs=${RUNS:-3} rates=${KV_RATES:-2000,5000,10000,20000,40000,80000} dur=${KV_DURATION:-2s}
fi
host_cpus=${HOST_CPUS:-1} nic_cpus=${NIC_CPUS:-0}
if [ "${PLACE:-}" = none ]; then
	place=none
else
	place="host=$host_cpus,nic=$nic_cpus"
fi
mkdir -p bench "$out" /run/vnic
mkdir -p bin
# The programs, in bin/: make build (a no-op when they are current).
make -s build >/dev/null
bin/vnicctl testbed up --hosts 4 --prefix "$prefix" --queues 2 --mtu 9000 >/dev/null
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	bin/vnicctl testbed down --prefix "$prefix" >/dev/null
}
trap cleanup EXIT
# start_nic starts host $1's NIC: the vnicd command line of the vNIC
# variant, in one place (another source, such as an emulated network
# between the hosts, is another case here), on the NIC CPUs.
start_nic() {
	local i=$1 pin=()
	[ "$place" = none ] || pin=(taskset -c "$nic_cpus")
	ip netns exec "$prefix-h$i" "${pin[@]}" bin/vnicd run --source xsk --iface "${prefix}h$i" --socket "/run/vnic/$prefix-h$i.sock" \
		--metrics-addr '' >"bench/vnicd-$prefix-h$i.log" 2>&1 &
	pids+=($!)
}
for i in 0 1 2; do start_nic "$i"; done
for i in 0 1 2; do
	for _ in $(seq 100); do [ -S "/run/vnic/$prefix-h$i.sock" ] && break; sleep 0.1; done
	[ -S "/run/vnic/$prefix-h$i.sock" ] || { echo "vnicd on host $i did not start:"; cat "bench/vnicd-$prefix-h$i.log"; exit 1; }
done
nic_pids=$(IFS=,; echo "${pids[*]}")
acct=(-place "$place" -nic-pids "$nic_pids")
uptime
if [ "${SKIP_SHUFFLE:-0}" != 1 ]; then
echo "== shuffle (3 hosts, 2 workers each; rows of 128 bytes per host: $rows)"
bin/shuffle "${acct[@]}" -testbed "$prefix" -hosts 3 -workers 2 -rows "$rows" -runs "$runs" -transport bi,tcp,tcp-both -csv "$out/shuffle-sweep.csv" -plot "$out/shuffle-sweep.png"
echo "== shuffle with 8900-byte messages (69 tuples; the testbed's MTU is 9000)"
bin/shuffle "${acct[@]}" -testbed "$prefix" -hosts 3 -workers 2 -rows "$rows" -runs "$runs" -msg 8900 -csv "$out/shuffle-sweep-jumbo.csv" -plot "$out/shuffle-sweep-jumbo.png"
echo "== shuffle, bi-channel on the vNIC fast path (each host's vnicd), against kernel TCP"
bin/shuffle "${acct[@]}" -testbed "$prefix" -hosts 3 -workers 2 -rows "$rows" -runs "$runs" -fast vnic -csv "$out/shuffle-sweep-vnic.csv"
echo "== shuffle, vNIC fast path with 8900-byte messages (vnicd takes each 9 KiB frame as three AF_XDP chunks: multi-buffer)"
bin/shuffle "${acct[@]}" -testbed "$prefix" -hosts 3 -workers 2 -rows "$rows" -runs "$runs" -fast vnic -msg 8900 -csv "$out/shuffle-sweep-vnic-jumbo.csv"
fi
uptime
echo "== kv (primary + 2 secondaries, 2 shards, client on its own host; offered rates $rates, $dur each)"
bin/kv "${acct[@]}" -testbed "$prefix" -secondaries 2 -shards 2 -conns 4 -rates "$rates" -duration "$dur" -transport hot,bi,tcp,tcp-both -csv "$out/kv-fig17.csv" -plot "$out/kv-fig17.png"
echo "== kv, bi-channel on the vNIC fast path"
bin/kv "${acct[@]}" -testbed "$prefix" -secondaries 2 -shards 2 -conns 4 -rates "$rates" -duration "$dur" -fast vnic -csv "$out/kv-fig17-vnic.csv"
echo "== kv with secondary 2 killed half-way (correctness: every live replica against the acknowledged log)"
bin/kv "${acct[@]}" -testbed "$prefix" -secondaries 2 -shards 2 -conns 4 -rates 5000 -duration "$dur" -kill
bin/kv "${acct[@]}" -testbed "$prefix" -secondaries 2 -shards 2 -conns 4 -rates 5000 -duration "$dur" -kill -fast vnic -transport hot
uptime
