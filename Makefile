# vnic: the two commands a fresh clone needs are `make demo` and `make test`.
GO        ?= go
PKGS      ?= ./...
# Debian packages the privileged tests and the demo use; installed when missing.
APT_PKGS  ?= iproute2 ethtool tcpdump tcpreplay netsniff-ng iperf3
BENCHTIME ?= 1s
BENCHCOUNT ?= 6
FUZZTIME  ?= 10s

.PHONY: all build test lint vet staticcheck race fuzz-smoke deps bench bench-smoke soak demo sim clean

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
	@mkdir -p bench
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -timeout 60m $(PKGS) | tee bench/latest.txt
	$(GO) run golang.org/x/perf/cmd/benchstat bench/latest.txt

# bench-smoke is what CI runs: every benchmark once, briefly.
bench-smoke:
	$(GO) test -run '^$$' -bench . -benchtime 100x -count 1 $(PKGS)

soak:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 10m ./rss

demo: build
	@scripts/demo.sh

# sim regenerates the simulator's CSVs and plots under docs/sim.
sim:
	$(GO) run ./cmd/vnicsim -exp all -out docs/sim -seed 1

clean:
	rm -rf bench
