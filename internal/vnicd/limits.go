package vnicd

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vnic/vnic/internal/daemon"
)

// Sizes are the limits given as sizes (512MiB), as given.
type Sizes struct {
	MaxRegion    string // --max-region
	DumpBuffer   string // --dump-buffer
	MemoryBudget string // --memory-budget: a size, or auto
}

// CheckLimits checks the control plane's limits and completes l with the
// sizes (zero fields of l then take the daemon's defaults).
func CheckLimits(l daemon.Limits, sz Sizes) (daemon.Limits, error) {
	if l.ReservedConns < 0 || l.ReservedConns > 1024 {
		return l, fmt.Errorf("--reserved-conns %d: give 0 (none) to 1024, e.g. 4", l.ReservedConns)
	}
	if l.ReservedConns == 0 {
		l.ReservedConns = -1 // none (a zero field takes the default)
	}
	if l.LogInterval < time.Second {
		return l, fmt.Errorf("--log-interval %v: give at least 1s, e.g. 1m", l.LogInterval)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max-conns", l.MaxConns}, {"max-conns-per-uid", l.MaxConnsPerUID}, {"max-tenants-per-uid", l.MaxTenantsPerUID}, {"max-name", l.MaxName}, {"max-dumps", l.MaxDumps}, {"log-burst", l.LogBurst}} {
		if f.v < 1 {
			return l, fmt.Errorf("--%s %d: give a positive number", f.name, f.v)
		}
	}
	if l.FirstMessageTimeout <= 0 || l.ReplyTimeout <= 0 {
		return l, fmt.Errorf("--first-message-timeout and --reply-timeout must be positive durations, e.g. 5s")
	}
	var err error
	if l.MaxRegionBytes, err = parseBytes(sz.MaxRegion); err != nil {
		return l, fmt.Errorf("--max-region: %w", err)
	}
	if l.DumpBufferBytes, err = parseBytes(sz.DumpBuffer); err != nil {
		return l, fmt.Errorf("--dump-buffer: %w", err)
	}
	if l.DumpBufferBytes < daemon.MinDumpBuffer || l.DumpBufferBytes > 1<<30 {
		return l, fmt.Errorf("--dump-buffer %s: give 64KiB..1GiB, e.g. 4MiB", sz.DumpBuffer)
	}
	if b := sz.MemoryBudget; b != "auto" {
		if l.MemoryBudget, err = parseBytes(b); err != nil {
			return l, fmt.Errorf("--memory-budget: %w", err)
		}
	}
	return l, nil
}

// parseBytes reads a positive size: a number of bytes with an optional
// KiB, MiB, GiB or TiB suffix.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	num := s
	for _, u := range []struct {
		suf string
		m   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}} {
		if strings.HasSuffix(s, u.suf) {
			mult, num = u.m, strings.TrimSuffix(s, u.suf)
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size; give bytes with an optional KiB, MiB, GiB or TiB suffix, e.g. 512MiB", s)
	}
	return n * mult, nil
}
