#!/usr/bin/env bash
# enginefloor.sh: the engine against its floor at 64 B.
# Runs, N times (default 6), one invocation of
#   nic.test -test.bench '^BenchmarkEngine$/rxbisect/64B|^BenchmarkFloor$/64B|CrossCoreLine'
# (each a fresh process; engine and floor interleaved within it), prints
# each invocation's figures and their ratio, then the medians, the ratio of
# the medians and the median of the per-invocation ratios, against the
# targets (<= 2x the floor, >= 15 Mpps). BenchmarkCrossCoreLine rides along:
# on a VM the cost of moving a cache line between the two vCPUs changes with
# where the host runs them (110-580 ns round trips seen on the same VM), and
# the floor's figure moves with it.
# VNIC_BENCH_PAGES=huge puts the engine's buffers, rings and frames (as a
# UMEM, at a 2 KiB stride) and the floor's in transparent huge pages, as
# vnicd's UMEM is and its tenant regions are where the host allows shmem
# THP; the default is the kernel's small pages (the figures of record
# before huge pages).
# As root the runs are SCHED_FIFO (chrt -f 10) so that other processes on
# the machine do not preempt the two pinned threads; RT=0 turns that off.
#   N=6 scripts/enginefloor.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-6}
BENCHTIME=${BENCHTIME:-2000000x}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go test -c -o "$bin/nic.test" ./nic
run=()
if [ "${RT:-1}" = 1 ] && [ "$(id -u)" -eq 0 ] && command -v chrt >/dev/null; then
	run=(chrt -f 10)
fi
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), kernel $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg), pages ${VNIC_BENCH_PAGES:-small} (VNIC_BENCH_PAGES)${run:+, under ${run[*]}}"
rows=()
for i in $(seq "$N"); do
	out=$(cd nic && "${run[@]}" "$bin/nic.test" -test.run '^$' -test.bench '^BenchmarkEngine$/rxbisect/64B|^BenchmarkFloor$/64B|CrossCoreLine' -test.benchtime "$BENCHTIME" 2>&1) || { echo "$out"; exit 1; }
	row=$(awk '
		/^BenchmarkEngine\/rxbisect\/64B/ { e = $3; for (f = 1; f <= NF; f++) { if ($(f+1) == "delivered/op") d = $f; if ($(f+1) == "depleted/op") x = $f; if ($(f+1) == "loads/op") l = $f } }
		/^BenchmarkFloor\/64B/ { fl = $3 }
		/^BenchmarkCrossCoreLine/ { c = $3 }
		END { printf "%s %s %s %s %s %s", e, fl, c, d, x, l }' <<<"$out")
	rows+=("$row")
	read -r e fl c d x l <<<"$row"
	awk -v i="$i" -v e="$e" -v fl="$fl" -v c="$c" -v d="$d" -v x="$x" -v l="$l" 'BEGIN {
		printf "run %2d: engine %6.1f ns/frame (%5.1f Mpps, delivered %s/op, depleted %s/op, cursor loads %s/op)  floor %5.1f ns  engine/floor %.2f  cross-core line %5.0f ns\n", i, e, 1000 / e, d, x, l, fl, e / fl, c }'
done
printf '%s\n' "${rows[@]}" | awk '
	function median(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{ e[NR] = $1; f[NR] = $2; c[NR] = $3; r[NR] = $1 / $2 }
	END {
		me = median(e, NR); mf = median(f, NR); mc = median(c, NR); mr = median(r, NR)
		printf "medians over %d invocations: engine %.1f ns/frame = %.1f Mpps (target >= 15), floor %.1f ns, engine/floor %.2f (median of ratios %.2f; target <= 2), cross-core line %.0f ns\n", NR, me, 1000 / me, mf, me / mf, mr, mc
	}'
