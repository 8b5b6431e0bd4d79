# vnic: the two commands a fresh clone needs are `make demo` and `make test`.
GO        ?= go
PKGS      ?= ./...
# Debian packages the privileged tests and the demo use; installed when missing.
APT_PKGS  ?= iproute2 ethtool tcpdump tcpreplay netsniff-ng iperf3 skopeo
BENCHTIME ?= 1s
BENCHCOUNT ?= 6
FUZZTIME  ?= 10s

.PHONY: image bench-all all build test lint vet staticcheck race fuzz-smoke deps bench bench-smoke soak demo sim clean

all: build

build:
	$(GO) build $(PKGS)

# deps installs what the tests need (Go modules come through the proxy).
deps:
	@scripts/deps.sh $(APT_PKGS)

lint: vet staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck $(PKGS)

# race runs every test, the privileged TestIntegration* ones included (they
# need root or CAP_NET_ADMIN/CAP_BPF and skip, saying why, without them).
race:
	$(GO) test -race -count=1 -timeout 12m $(PKGS)

fuzz-smoke:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./rss

test: deps build lint race fuzz-smoke
	@echo "make test: all checks passed"

# bench runs every benchmark BENCHCOUNT times, interleaved, and summarises
# with benchstat. Figures go into BENCHMARKS.md by hand, with the machine.
bench: build
	COUNT=$(BENCHCOUNT) scripts/bench.sh

# bench-all runs every benchmark of every package (slow).
bench-all: build
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count 1 -timeout 60m $(PKGS)

# bench-smoke is what CI runs: the make bench set once, briefly.
bench-smoke:
	SMOKE=1 scripts/bench.sh

soak:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 10m ./rss
	VNIC_HANDOFF_ORDER_FRAMES=10000000 $(GO) test -count=1 -timeout 30m -run '^TestIntegrationHandoffOrder$$' -v ./tests/

# image writes bin/vnic-image.tar, an OCI image (also a docker-archive) with
# static vnicd, vnicctl and rxcount, built offline: docker load -i / podman
# load -i take it. -buildvcs=auto overrides a GOFLAGS=-buildvcs=false so the
# tag comes from the commit (internal/image).
image:
	mkdir -p bin/static
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -trimpath -o bin/static/ ./cmd/vnicd ./cmd/vnicctl ./examples/rxcount
	$(GO) run ./internal/image/mkimage -bin bin/static -o bin/vnic-image.tar

demo: build
	@scripts/demo.sh

# sim regenerates the simulator's CSVs and plots under docs/sim.
sim:
	$(GO) run ./cmd/vnicsim -exp all -out docs/sim -seed 1

clean:
	rm -rf bench
