#!/usr/bin/env bash
# make demo: build, run the emulated NIC with traffic, show its counters.
#
# Today this runs vnicd with its synthetic-traffic source and in-process
# consumers (the cross-process attach and the namespaced veth testbed with
# real AF_XDP traffic are the next steps; see README "Status").
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
go build -o bin/vnicd ./cmd/vnicd
go build -o bin/vnicctl ./cmd/vnicctl
cpus=$(nproc)
ecpu=0; ccpu=1
if [ "$cpus" -lt 2 ]; then ecpu=-1; ccpu=-1; fi
echo "== synthetic-traffic mode: vnicd emulates the NIC on CPU $ecpu, the demo consumers run on CPU $ccpu"
for model in rxbisect privring shring; do
	echo
	echo "== model $model: 4 queues, 64-byte frames, 3 seconds"
	ax=128
	[ "$model" = privring ] && ax=1024
	bin/vnicd run --model "$model" --queues 4 --ax-size "$ax" --bx-size 1024 \
		--emulator-cpu "$ecpu" --consumer-cpu "$ccpu" --rate 2000000 --dist replay \
		--duration 3s --report 1s --log-format console
done
echo
echo "== which queue does a flow land on? (vnicctl rss hash)"
bin/vnicctl rss hash --src 198.18.0.1 --dst 198.19.0.1 --sport 40000 --dport 9000 --queues 4
