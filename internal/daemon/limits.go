package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Limits bound what clients can make vnicd hold. Each has a vnicd run flag
// (named in the field's comment) and a default that New fills in for a
// zero value; docs/operations.md lists them. A negative value means "no
// limit" where the comment says so.
type Limits struct {
	// MaxConns bounds open control connections (--max-conns, 256).
	MaxConns int
	// MaxConnsPerUID bounds one uid's open control connections
	// (--max-conns-per-uid, 64). A tenant holds one connection.
	MaxConnsPerUID int
	// ReservedConns are connections above MaxConns and MaxConnsPerUID
	// for root (uid 0), and as many again for the members of
	// Config.AdminGroup (--reserved-conns, 4; negative: none), like
	// PostgreSQL's superuser_reserved_connections: the operator's vnicctl
	// still answers when others hold every ordinary connection. vnicd's
	// own uid has no reserve unless it is root. A reserved connection
	// serves commands, not tenants, is closed once it sits idle for
	// FirstMessageTimeout, and a new connection of its class takes the
	// place of the idlest when the reserve is full (reserve.go).
	ReservedConns int
	// MaxTenantsPerUID bounds one uid's attached tenants
	// (--max-tenants-per-uid, 16), so one client cannot take every slot.
	MaxTenantsPerUID int
	// FirstMessageTimeout closes a connection that sends nothing for this
	// long after connecting (--first-message-timeout, 5s).
	FirstMessageTimeout time.Duration
	// ReplyTimeout closes a connection whose peer does not take a reply
	// within this long (--reply-timeout, 2s).
	ReplyTimeout time.Duration
	// MaxRegionBytes bounds one tenant's shared region (rings, allocator,
	// buffers) (--max-region, 1 GiB).
	MaxRegionBytes int64
	// MemoryBudget bounds the sum of every attached tenant's region, the
	// shared memory vnicd populates (--memory-budget, half of MemTotal,
	// at least 1 GiB).
	MemoryBudget int64
	// MaxName bounds a tenant name's length in bytes (--max-name, 64).
	MaxName int
	// HugePages lets tenant regions use hugetlb pages
	// (--tenant-huge-pages, off). Off by default because a tenant can punch
	// a hole in its region's memfd (fallocate(PUNCH_HOLE); the seals do not
	// forbid it): on hugetlb, vnicd's next access to that page faults in a
	// new huge page, and with the pool empty the kernel sends vnicd SIGBUS.
	// On ordinary shared memory the hole reads back as zeros, which the
	// engine's checks treat as any other garbage (the tenant alone loses).
	// Turn it on only when every tenant is trusted.
	HugePages bool
	// MaxDumps bounds the dump sessions (vnicctl dump) running at once
	// (--max-dumps, 4). A tenant has at most one.
	MaxDumps int
	// LogBurst and LogInterval rate-limit the warnings a client can cause
	// (an oversized request, a bad geometry, a reply timeout...): per
	// client uid and reason, LogBurst lines per LogInterval, then one
	// summary line with the count of what was suppressed (--log-burst, 5;
	// --log-interval, 1m).
	LogBurst    int
	LogInterval time.Duration
	// DumpBufferBytes is each dump session's mirror ring, the memory a
	// dump makes vnicd hold (--dump-buffer, 4 MiB): at most
	// MaxDumps*DumpBufferBytes in all. Frames that find it full are not
	// captured (counted as dump_mirror_drops), never lost to the tenant.
	DumpBufferBytes int64
}

// DefaultDumpBuffer is --dump-buffer's default; MinDumpBuffer its least
// value (16 frames of the largest buffer, 64 KiB).
const (
	DefaultDumpBuffer = 4 << 20
	MinDumpBuffer     = 64 << 10
)

func (l *Limits) defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxConns, 256)
	def(&l.MaxConnsPerUID, 64)
	def(&l.MaxTenantsPerUID, 16)
	def(&l.MaxName, 64)
	def(&l.MaxDumps, 4)
	def(&l.ReservedConns, 4)
	def(&l.LogBurst, 5)
	if l.LogInterval <= 0 {
		l.LogInterval = time.Minute
	}
	if l.DumpBufferBytes == 0 {
		l.DumpBufferBytes = DefaultDumpBuffer
	}
	if l.FirstMessageTimeout == 0 {
		l.FirstMessageTimeout = 5 * time.Second
	}
	if l.ReplyTimeout == 0 {
		l.ReplyTimeout = 2 * time.Second
	}
	if l.MaxRegionBytes == 0 {
		l.MaxRegionBytes = 1 << 30
	}
	if l.MemoryBudget == 0 {
		l.MemoryBudget = DefaultMemoryBudget()
	}
}

// DefaultMemoryBudget is half of the machine's MemTotal, at least 1 GiB.
func DefaultMemoryBudget() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					return max(kb<<10/2, 1<<30)
				}
			}
		}
	}
	return 1 << 30
}

// checkName accepts a tenant name of 1..max bytes that starts with a letter
// and holds only letters, digits and . _ - : @ + (it becomes a metrics label
// and a table cell; nothing in it can steer a terminal).
func checkName(name string, max int) error {
	if len(name) > max {
		return fmt.Errorf("tenant name of %d bytes is longer than %d (--max-name); pick a shorter one", len(name), max)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if i > 0 {
			ok = ok || r >= '0' && r <= '9' || strings.ContainsRune("._-:@+", r)
		}
		if !ok {
			return fmt.Errorf("tenant name %s: use a letter first, then letters, digits and . _ - : @ + only", strconv.QuoteToASCII(name))
		}
	}
	return nil
}
