#!/usr/bin/env bash
# The bi-channel paper's two case studies on vnicd's fabric: every node is
# a host of one vnicd run --source fabric (an emulated network between the
# tenants, the engine's copy the only copy), control paths on 127.0.0.x.
# Every host and the KV's load client run on HOST_CPUS (default 1), vnicd's
# engine (the emulated NIC) on NIC_CPUS (default 0); kernel TCP runs on the
# host CPUs too (tcp, with no vnicd running, so the NIC CPUs' idleness
# shows it got no help) and on both (tcp-both, its best case). Each host is
# a process of its own (PROCS=per-host, the default; PROCS=one runs them
# all in the command's process), the KV's load client in the command's. Writes the
# CSVs and plots of Figures 14, 17 and 18 (-fabric variants) to bench/, or
# to FIGS (FIGS=docs: the figures the docs show), and its log to
# bench/casestudies-fabric-run.txt (SMOKE=1: a brief run into bench/).
# Needs no namespaces or privileges.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${FIGS:-bench}
if [ "${SMOKE:-0}" = 1 ]; then
	out=bench
	rates=10000,40000 runs=1 rows=50000 dur=500ms
else
	rates=${KV_RATES:-10000,20000,40000,80000,160000,250000,400000,600000}
	runs=${RUNS:-3} rows=${SHUFFLE_ROWS:-300000,1000000} dur=${KV_DURATION:-1s}
fi
place="host=${HOST_CPUS:-1},nic=${NIC_CPUS:-0}"
procs=${PROCS:-per-host}
mkdir -p "$out" bench
mkdir -p bin
# The programs, in bin/: make build (a no-op when they are current).
make -s build >/dev/null
log=bench/casestudies-fabric-run.txt
: > "$log"
note() { echo "== $* ($(date -u +%FT%TZ); $(uptime))" | tee -a "$log"; }
note "KV sweep, placement $place, procs $procs"
bin/kv -fast fabric -vnicd bin/vnicd -place "$place" -procs "$procs" -transport hot,bi,tcp,tcp-both -rates "$rates" -duration "$dur" -runs "$runs" -check \
	-csv "$out/kv-fig17-fabric.csv" -plot "$out/kv-fig17-fabric.png" -plot18 "$out/kv-fig18-fabric.png" | tee -a "$log"
note "KV, secondary 2 killed half-way"
bin/kv -fast fabric -vnicd bin/vnicd -place "$place" -procs "$procs" -transport hot,bi,tcp -rates 20000,80000 -duration "$dur" -kill \
	-csv "$out/kv-fabric-kill.csv" | tee -a "$log"
for msg in 1400 8192; do
	sfx=""
	[ "$msg" = 8192 ] && sfx="-8k"
	note "shuffle, $msg-byte messages"
	bin/shuffle -fast fabric -vnicd bin/vnicd -place "$place" -procs "$procs" -transport bi,tcp,tcp-both -rows "$rows" -runs "$runs" -msg "$msg" \
		-csv "$out/shuffle-fig14-fabric$sfx.csv" -plot "$out/shuffle-fig14-fabric$sfx.png" | tee -a "$log"
done
note "done"
