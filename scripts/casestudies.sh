#!/usr/bin/env bash
# Issue 12: the two database case studies of the bi-channel paper on a
# 4-host namespaced testbed (hosts 0-2 run the shuffle; the KV's primary is
# host 0, its secondaries hosts 1-2, its load client host 3), each over the
# bi-channel (kernel UDP fast path) and over kernel TCP, interleaved in one
# run (MTU 9000: the shuffle runs with 1400- and with 8900-byte messages). Writes CSVs and plots to docs/ (SMOKE=1: a brief run into bench/).
# Root only (network namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."
out=docs
prefix="cs$(($$ % 10000))"
if [ "${SMOKE:-0}" = 1 ]; then
	out=bench
	rows=20000 runs=1 rates=2000,8000 dur=500ms
else
	rows=${SHUFFLE_ROWS:-25000,100000,400000} runs=${RUNS:-3} rates=${KV_RATES:-2000,5000,10000,20000,40000,80000} dur=${KV_DURATION:-2s}
fi
mkdir -p bench "$out"
go build -o bench/vnicctl ./cmd/vnicctl
go build -o bench/shuffle ./examples/shuffle
go build -o bench/kv ./examples/kv
bench/vnicctl testbed up --hosts 4 --prefix "$prefix" --queues 2 --mtu 9000 >/dev/null
trap 'bench/vnicctl testbed down --prefix "$prefix" >/dev/null' EXIT
echo "== shuffle (3 hosts, 2 workers each; rows of 128 bytes per host: $rows)"
bench/shuffle -testbed "$prefix" -hosts 3 -workers 2 -rows "$rows" -runs "$runs" -csv "$out/shuffle-sweep.csv" -plot "$out/shuffle-sweep.png"
echo "== shuffle with 8900-byte messages (69 tuples; the testbed's MTU is 9000)"
bench/shuffle -testbed "$prefix" -hosts 3 -workers 2 -rows "$rows" -runs "$runs" -msg 8900 -csv "$out/shuffle-sweep-jumbo.csv" -plot "$out/shuffle-sweep-jumbo.png"
echo "== kv (primary + 2 secondaries, 2 shards, client on its own host; offered rates $rates, $dur each)"
bench/kv -testbed "$prefix" -secondaries 2 -shards 2 -conns 4 -rates "$rates" -duration "$dur" -csv "$out/kv-fig17.csv" -plot "$out/kv-fig17.png"
echo "== kv with secondary 2 killed half-way (correctness: every live replica against the acknowledged log)"
bench/kv -testbed "$prefix" -secondaries 2 -shards 2 -conns 4 -rates 5000 -duration "$dur" -kill
