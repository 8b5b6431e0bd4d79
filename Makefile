# vnic: the two commands a fresh clone needs are `make demo` and `make test`.
GO        ?= go
PKGS      ?= ./...
# The programs with heavy dependencies (plots, the OCI image builder, the
# Kubernetes manifests' checks, the case studies that plot) are a second
# module in tools/, so that an application importing the library does not
# get their dependencies (internal/modgraph tests it). Every target below
# runs in both modules (TOOLS_PKGS= leaves the tools out); build puts the
# tools' programs (TOOLS_CMDS) into bin/ beside vnicd and vnicctl, and they
# run from the repository root (their output paths are relative to it).
# staticcheck and benchstat are tools of tools/go.mod too. No
# go.work is committed: in a workspace the two modules' requirements would
# be resolved together, and the root module's tests would no longer build
# against the versions an application importing it gets.
TOOLS_PKGS ?= ./...
# The tools' programs that make build puts into bin/ (paths in tools/).
TOOLS_CMDS ?= ./examples/kv ./examples/shuffle ./examples/section4 ./cmd/vnicsim \
	./cmd/msgcost ./tests/fig16 ./tests/cachesweep ./tests/coreside
# Debian packages the privileged tests and the demo use; installed when missing.
APT_PKGS  ?= iproute2 ethtool tcpdump tcpreplay netsniff-ng iperf3 skopeo tshark stress-ng
BENCHTIME ?= 1s
BENCHCOUNT ?= 6
# Fuzz budgets are counts, not durations: with a duration, Go 1.26's fuzz
# coordinator can report "context deadline exceeded" as a failure when the
# time runs out mid-execution (golang/go#75804, fixed in Go 1.27; CI hit it
# once in FuzzOnDatagram with no failing input). A count has no deadline.
FUZZTIME  ?= 300000x
# The bi-channel's decoders of what comes from the network (each briefly in
# make test, for BICHANNEL_SOAK each in make soak).
BICHANNEL_FUZZ ?= FuzzParseHello FuzzDatagram FuzzControlRecords FuzzHandshakeFrames FuzzReadFrame FuzzUDPPayload FuzzOnDatagram
BICHANNEL_FUZZTIME ?= 20000x
BICHANNEL_SOAK ?= 2m

# The version --version prints (else the build information's, see
# internal/buildinfo).
VERSION   ?= $(shell git -c safe.directory='*' describe --tags --always --dirty 2>/dev/null)
LDFLAGS   ?= $(if $(VERSION),-X github.com/vnic/vnic/internal/buildinfo.Override=$(VERSION))
PREFIX    ?= /usr/local
DESTDIR   ?=
BINDIR    ?= $(PREFIX)/bin
# systemd reads units and sysusers.d from /usr/local/lib too.
UNITDIR   ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
DOCDIR    ?= $(PREFIX)/share/doc/vnic
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d

.PHONY: test-busy image install uninstall bench-all all build test lint vet darwin staticcheck race fuzz-smoke deps bench bench-smoke soak demo sim clean

all: build

# build compiles everything and puts the commands in bin/: vnicd, vnicctl
# and (unless TOOLS_PKGS=) the tools' programs, kv, shuffle, section4,
# vnicsim, fig16, cachesweep and coreside.
build:
	$(GO) build $(PKGS)
	$(if $(TOOLS_PKGS),$(GO) -C tools build $(TOOLS_PKGS))
	@mkdir -p bin
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/vnicd ./cmd/vnicctl
	$(if $(TOOLS_PKGS),$(GO) -C tools build -o $(CURDIR)/bin/ $(TOOLS_CMDS))

# install copies the commands, the systemd unit (its paths follow PREFIX),
# the sysusers.d file, shell completion, the operations guide and the design under
# DESTDIR/PREFIX. Then, as root: systemd-sysusers; systemctl daemon-reload.
install: build
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(DOCDIR) \
		$(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 0755 bin/vnicd bin/vnicctl $(DESTDIR)$(BINDIR)/
	sed -e 's|/usr/local/bin/|$(BINDIR)/|g' -e 's|/usr/local/share/doc/vnic/|$(DOCDIR)/|g' \
		-e '/^# Install (see docs\/operations.md):$$/,/enable --now vnicd$$/c\# Installed by make install as $(UNITDIR)/vnicd.service (make uninstall removes it);\n# then, as root: systemd-sysusers \&\& systemctl daemon-reload \&\& systemctl enable --now vnicd' \
		contrib/systemd/vnicd.service >$(DESTDIR)$(UNITDIR)/vnicd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/vnicd.service
	install -m 0644 contrib/systemd/vnic.sysusers $(DESTDIR)$(SYSUSERSDIR)/vnic.conf
	install -m 0644 docs/operations.md docs/design.md $(DESTDIR)$(DOCDIR)/
	for c in vnicd vnicctl; do \
		bin/$$c completion bash >$(DESTDIR)$(BASHCOMPDIR)/$$c && \
		bin/$$c completion zsh >$(DESTDIR)$(ZSHCOMPDIR)/_$$c && \
		bin/$$c completion fish >$(DESTDIR)$(FISHCOMPDIR)/$$c.fish || exit 1; \
	done
	@echo "installed under $(DESTDIR)$(PREFIX); as root run: systemd-sysusers && systemctl daemon-reload && systemctl enable --now vnicd"

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/vnicd $(DESTDIR)$(BINDIR)/vnicctl $(DESTDIR)$(UNITDIR)/vnicd.service \
		$(DESTDIR)$(SYSUSERSDIR)/vnic.conf $(DESTDIR)$(DOCDIR)/operations.md $(DESTDIR)$(DOCDIR)/design.md \
		$(DESTDIR)$(BASHCOMPDIR)/vnicd $(DESTDIR)$(BASHCOMPDIR)/vnicctl $(DESTDIR)$(ZSHCOMPDIR)/_vnicd \
		$(DESTDIR)$(ZSHCOMPDIR)/_vnicctl $(DESTDIR)$(FISHCOMPDIR)/vnicd.fish $(DESTDIR)$(FISHCOMPDIR)/vnicctl.fish
	rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null || true

# deps installs what the tests need (Go modules come through the proxy).
deps:
	@scripts/deps.sh $(APT_PKGS)

lint: vet staticcheck darwin
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
	$(if $(TOOLS_PKGS),$(GO) -C tools vet $(TOOLS_PKGS))

# darwin checks that everything, tests included, builds off Linux
# (docs/design.md §8.6: Linux-only code in _linux.go files, stubs elsewhere).
darwin:
	GOOS=darwin $(GO) build $(PKGS)
	GOOS=darwin $(GO) vet $(PKGS)
	$(if $(TOOLS_PKGS),GOOS=darwin $(GO) -C tools build $(TOOLS_PKGS))
	$(if $(TOOLS_PKGS),GOOS=darwin $(GO) -C tools vet $(TOOLS_PKGS))

# staticcheck is a tool of the tools module (tools/go.mod: in the root
# go.mod it would be in every consumer's module graph). One binary, built
# into bin/, checks both modules, each from its own directory.
staticcheck:
	@mkdir -p bin
	$(GO) -C tools build -o $(CURDIR)/bin/staticcheck honnef.co/go/tools/cmd/staticcheck
	bin/staticcheck $(PKGS)
	$(if $(TOOLS_PKGS),cd tools && ../bin/staticcheck $(TOOLS_PKGS))

# race runs every test, the privileged TestIntegration* ones included (they
# need root or CAP_NET_ADMIN/CAP_BPF and skip, saying why, without them).
# tests/hostile runs on its own afterwards: each of its tests requires the
# good tenant to keep >= 95% of its rate during an attack, and its receiver
# (in the test process) must not share the 2 CPUs with other packages' race
# tests (it once got 74% that way, 100% alone).
race:
	$(GO) test -race -count=1 -timeout 12m $$($(GO) list $(PKGS) | grep -v '/tests/hostile$$')
	$(if $(TOOLS_PKGS),$(GO) -C tools test -race -count=1 -timeout 12m $(TOOLS_PKGS))
	$(GO) test -race -count=1 -timeout 12m ./tests/hostile

fuzz-smoke:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./rss
	@for f in $(BICHANNEL_FUZZ); do $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(BICHANNEL_FUZZTIME) ./bichannel || exit 1; done
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./internal/proto
	$(GO) test -run '^$$' -fuzz '^FuzzWakeChannel$$' -fuzztime 20000x ./nic

test: deps build lint race fuzz-smoke
	@echo "make test: all checks passed"

# test-busy runs make test while stress-ng keeps BUSY_CPUS CPUs busy (2 by
# default: every CPU of the 2-core CI VM), for at most 30 minutes: a test
# that only passes on an idle machine fails here. stress-ng is stopped by
# its pid when make test ends.
BUSY_CPUS ?= 2
test-busy: deps
	@stress-ng --cpu $(BUSY_CPUS) --timeout 30m --quiet & pid=$$!; \
	$(MAKE) test; rc=$$?; kill $$pid 2>/dev/null; wait $$pid 2>/dev/null; exit $$rc

# bench runs every benchmark BENCHCOUNT times, interleaved, and summarises
# with benchstat. Figures go into BENCHMARKS.md by hand, with the machine.
bench: build
	COUNT=$(BENCHCOUNT) scripts/bench.sh

# bench-all runs every benchmark of every package (slow).
bench-all: build
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count 1 -timeout 60m $(PKGS)
	$(if $(TOOLS_PKGS),$(GO) -C tools test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count 1 -timeout 60m $(TOOLS_PKGS))

# bench-smoke is what CI runs: the make bench set once, briefly.
bench-smoke:
	SMOKE=1 scripts/bench.sh

soak:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 10m ./rss
	VNIC_HANDOFF_ORDER_FRAMES=10000000 $(GO) test -count=1 -timeout 30m -run '^TestIntegrationHandoffOrder$$' -v ./tests/
	@for f in $(BICHANNEL_FUZZ); do $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(BICHANNEL_SOAK) ./bichannel || exit 1; done
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 10m ./internal/proto
	$(GO) test -run '^$$' -fuzz '^FuzzWakeChannel$$' -fuzztime 5m ./nic
	VNIC_SOAK=1 $(GO) test -count=1 -timeout 20m -run 'TestIntegrationHostile' -v ./tests/hostile
	VNIC_SOAK_DURATION=10m $(GO) test -count=1 -timeout 30m -run '^TestSoakMixedMigrating$$' -v ./nic/
	VNIC_SOAK=1 $(GO) test -count=1 -run '^TestWakeupExchanges$$' -v -timeout 90m ./internal/daemon

# image writes bin/vnic-image.tar, an OCI image (also a docker-archive) with
# static vnicd, vnicctl and rxcount, built offline: docker load -i / podman
# load -i take it. -buildvcs=auto overrides a GOFLAGS=-buildvcs=false so the
# tag comes from the commit (tools/internal/image).
image:
	mkdir -p bin/static
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -trimpath -o bin/static/ ./cmd/vnicd ./cmd/vnicctl ./examples/rxcount
	$(GO) -C tools build -o $(CURDIR)/bin/mkimage ./internal/image/mkimage
	bin/mkimage -bin bin/static -o bin/vnic-image.tar

# demo builds only what it runs (vnicd, vnicctl and examples/rxcount: the
# script builds them), not the tools module, so a fresh clone reaches
# traffic quickly; make build builds everything.
demo:
	@VERSION=$(VERSION) scripts/demo.sh

# sim regenerates the simulator's CSVs and plots under docs/sim.
sim:
	@mkdir -p bin
	$(GO) -C tools build -o $(CURDIR)/bin/ ./cmd/vnicsim
	bin/vnicsim -exp all -out docs/sim -seed 1

clean:
	rm -rf bench bin
