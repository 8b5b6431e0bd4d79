#!/usr/bin/env bash
# make bench: the benchmarks behind BENCHMARKS.md, interleaved (A B A B ...)
# COUNT times so that a noisy neighbour hits every variant alike, then
# summarised with benchstat. SMOKE=1 runs each once, briefly (CI).
# Raw outputs go into bench/ (ignored by git; make clean removes it), and so
# do the figures' CSVs and plots unless FIGS names another folder:
# FIGS=docs regenerates the figures the docs show.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-6}
out=bench
figs=${FIGS:-$out}
mkdir -p "$out" "$figs"
figs=$(cd "$figs" && pwd) # absolute: go test runs in tests/
n() { if [ "${SMOKE:-0}" = 1 ]; then echo 100x; else echo "$1"; fi; }
[ "${SMOKE:-0}" = 1 ] && COUNT=1
: >"$out/ring.txt"; : >"$out/engine.txt"; : >"$out/rss.txt"; : >"$out/alloc.txt"; : >"$out/boundary.txt"
{
	echo "nproc: $(nproc)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
	echo "kernel: $(uname -r)"
	echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
	go version
} >"$out/machine.txt"
# The experiment runners that draw plots are in the tools module
# (tools/go.mod, which holds the plotting library): built into bin/ as
# make build does, and run from the repository root like the rest.
mkdir -p bin
go -C tools build -o "$PWD/bin/" ./tests/cachesweep ./tests/coreside ./tests/fig16 ./cmd/msgcost
for i in $(seq "$COUNT"); do
	go test -run '^$' -bench 'Ring|Chan' -benchtime "$(n 3000000x)" -count 1 ./ring >>"$out/ring.txt"
	go test -run '^$' -bench 'Engine|Floor|CrossCoreLine' -benchtime "$(n 2000000x)" -count 1 ./nic >>"$out/engine.txt"
	go test -run '^$' -bench 'Toeplitz|Parse|Pick' -benchtime "$(n 1s)" -count 1 ./rss >>"$out/rss.txt"
	go test -run '^$' -bench . -benchtime "$(n 1s)" -count 1 ./alloc >>"$out/alloc.txt"
	go test -run '^$' -bench ProcessBoundary -benchtime "$(if [ "${SMOKE:-0}" = 1 ]; then echo 1x; else echo 2x; fi)" -count 1 ./internal/daemon >>"$out/boundary.txt"
done
for f in ring engine rss alloc boundary; do
	echo "== $f"
	# benchstat is a tool of tools/go.mod and runs in tools/: the path is
	# absolute, labelled (label=path) with the relative one for the header.
	go -C tools tool benchstat "$out/$f.txt=$PWD/$out/$f.txt" | grep -vE '^(goos|goarch|pkg|cpu):'
done
cat "$out/machine.txt"
if [ "${MSGCOST:-1}" = 1 ]; then
	# Host CPU per message on the fabric, the bi-channel's kernel UDP path
	# and kernel TCP, interleaved (BENCHMARKS.md, "Cost per message"); no
	# root needed. bin/vnicd is make build's.
	echo "== cost per message (nodes on CPU 1, vnicd on CPU 0)"
	if [ "${SMOKE:-0}" = 1 ]; then
		"bin/msgcost" -vnicd bin/vnicd -runs 1 -sizes 64 -batch 32 -duration 100ms -warmup 50ms -patterns stream,pingpong,idle -idle-settle 500ms -idle-for 1s | tee "$out/msgcost.txt"
	else
		"bin/msgcost" -vnicd bin/vnicd -runs 2 -duration 500ms | tee "$out/msgcost.txt"
	fi
fi
if [ "${CACHE:-1}" = 1 ]; then
	# The working-set sweep on this machine's real caches (docs/cache.md)
	# and the core-side cost per packet of privring, shring and rxbisect
	# (docs/coreside.md), each one command writing a CSV and a plot.
	# SMOKE=1 runs them tiny and keeps the output in bench/.
	echo "== cache working-set sweep and core-side cost (real engine, CPUs 0 and 1)"
	if [ "${SMOKE:-0}" = 1 ]; then
		"bin/cachesweep" -smoke -out "$out/cache"
		"bin/coreside" -count 1 -benchtime 200x -out "$out/coreside"
	else
		"bin/cachesweep" -out "$figs/cache" | tee "$out/cache.txt"
		"bin/coreside" -out "$figs/coreside" | tee "$out/coreside.txt"
	fi
fi
if [ "${SMOKE:-0}" != 1 ] && [ "${RECEIVERS:-1}" = 1 ] && [ "$(id -u)" -eq 0 ]; then
	echo "== receivers (real traffic through the veth testbed; root only)"
	go test -run '^$' -bench Receivers -benchtime 1x -timeout 20m ./tests/ | tee "$out/receivers.txt"
fi
if [ "${BICHANNEL:-1}" = 1 ] && [ "$(id -u)" -eq 0 ]; then
	# The bi-channel through vnicd vs over kernel UDP vs kernel TCP between
	# two namespaced hosts, and Figure 16 (p95 against the offered rate).
	# SMOKE=1 runs it briefly and keeps the figure in bench/.
	echo "== bi-channel testbed (vnicd on the DUT end, engine on CPU 0; root only)"
	if [ "${SMOKE:-0}" = 1 ]; then
		csv="$PWD/$out/bichannel-fig16.csv" # absolute: go test runs in tests/
		export BICH_REPS=1 BICH_PING_MS=200 BICH_PIPE_MS=200 BICH_BATCHES=200 BICH_FIG16_MS=100 BICH_FIG16_RATES=2000,20000
	else
		csv="$figs/bichannel-fig16.csv"
	fi
	BICH_FIG16_CSV="$csv" go test -run '^$' -bench BichannelTestbed -benchtime 1x -timeout 20m ./tests/ | tee "$out/bichannel.txt"
	"bin/fig16" -csv "$csv"
	echo "== bi-channel testbed, NIC-core placement (vnicd busy on CPU 0, applications on the last CPU)"
	BICH_PLACEMENT=niccore BICH_FIG16=0 go test -run '^$' -bench BichannelTestbed -benchtime 1x -timeout 20m ./tests/ | tee "$out/bichannel-niccore.txt"
	echo "== bi-channel testbed, split placement (the client alone on the last CPU, spinning; the server beside vnicd's SCHED_IDLE engine on CPU 0) and its Figure 16"
	if [ "${SMOKE:-0}" = 1 ]; then
		BICH_PLACEMENT=split BICH_FIG16=0 go test -run '^$' -bench BichannelTestbed -benchtime 1x -timeout 20m ./tests/ | tee "$out/bichannel-split.txt"
	else
		BICH_PLACEMENT=split BICH_FIG16_CSV="$figs/bichannel-fig16-split.csv" go test -run '^$' -bench BichannelTestbed -benchtime 1x -timeout 20m ./tests/ | tee "$out/bichannel-split.txt"
		"bin/fig16" -csv "$figs/bichannel-fig16-split.csv" -title "p95 latency vs offered load, 64 B messages (testbed, 2 vCPUs, split placement)"
	fi
	echo "== bi-channel testbed, NIC-core placement, jumbo frames (MTU 9000: multi-buffer AF_XDP, one datagram per 8 KiB message)"
	BICH_MTU=9000 BICH_PLACEMENT=niccore BICH_FIG16=0 go test -run '^$' -bench BichannelTestbed -benchtime 1x -timeout 20m ./tests/ | tee "$out/bichannel-niccore-mtu9000.txt"
fi
if [ "${CASESTUDIES:-1}" = 1 ] && [ "$(id -u)" -eq 0 ]; then
	# The hash shuffle and the quorum-replicated KV on a 4-host testbed,
	# bi-channel vs kernel TCP (docs/shuffle.md, docs/kv.md).
	FIGS="$figs" scripts/casestudies.sh | tee "$out/casestudies.txt"
fi
