#!/usr/bin/env bash
# boundary.sh: the process-boundary check (target: crossproc/inproc >= 0.9
# in 20 of 20 invocations). Runs
#   go test -run '^$' -bench ProcessBoundary -benchtime 1x ./internal/daemon
# N times (default 20), each invocation a fresh process (so a CPU mask
# leaked into a forked child shows up as it did: one slow invocation in a
# few), and prints every invocation's crossproc/inproc ratio, then the
# minimum, the median and how many reached the target (>= 0.9). The ratio
# of record is the paired sub-benchmark's (the two consumers in alternating
# 250 ms windows on one daemon); the ratio of the sequential inproc and
# crossproc sub-benchmarks is printed beside it: on this VM the host can
# change state between them (BENCHMARKS.md), which moves that ratio.
#   N=20 scripts/boundary.sh          TARGET=0.9 by default
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20}
TARGET=${TARGET:-0.9}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go test -c -o "$bin/daemon.test" ./internal/daemon
echo "nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), kernel $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
ratios=()
for i in $(seq "$N"); do
	out=$("$bin/daemon.test" -test.run '^$' -test.bench ProcessBoundary -test.benchtime 1x 2>&1) || { echo "$out"; exit 1; }
	in=$(awk '/ProcessBoundary\/inproc/ {for (f=1; f<=NF; f++) if ($(f+1) == "Mpps") print $f}' <<<"$out")
	cross=$(awk '/ProcessBoundary\/crossproc/ {for (f=1; f<=NF; f++) if ($(f+1) == "Mpps") print $f}' <<<"$out")
	eng=$(awk '/ProcessBoundary\/engine/ {for (f=1; f<=NF; f++) if ($(f+1) == "Mpps") print $f}' <<<"$out")
	seq=$(awk -v a="$cross" -v b="$in" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
	r=$(awk '/ProcessBoundary\/paired/ {for (f=1; f<=NF; f++) if ($(f+1) == "crossproc/inproc") printf "%.3f", $f}' <<<"$out")
	pin=$(awk '/ProcessBoundary\/paired/ {for (f=1; f<=NF; f++) if ($(f+1) == "inproc-Mpps") print $f}' <<<"$out")
	pcross=$(awk '/ProcessBoundary\/paired/ {for (f=1; f<=NF; f++) if ($(f+1) == "crossproc-Mpps") print $f}' <<<"$out")
	ratios+=("$r")
	printf 'run %2d: engine %6s  inproc %6s  crossproc %6s Mpps (one after the other: %s)  paired: inproc %6s crossproc %6s Mpps  crossproc/inproc %s\n' "$i" "$eng" "$in" "$cross" "$seq" "$pin" "$pcross" "$r"
done
printf '%s\n' "${ratios[@]}" | sort -g | awk -v t="$TARGET" '
	{ v[NR] = $1; if ($1 >= t) ok++ }
	END {
		med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "crossproc/inproc over %d invocations: min %.3f, median %.3f, %d of %d >= %s\n", NR, v[1], med, ok + 0, NR, t
	}'
