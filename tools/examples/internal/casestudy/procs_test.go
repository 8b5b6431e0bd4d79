package casestudy

import (
	"flag"
	"io"
	"testing"
)

// TestProcsFlag: -procs takes one (the default) or per-host and refuses
// the rest; VnicdMode names vnicd's idle mode for the header.
func TestProcsFlag(t *testing.T) {
	parse := func(args ...string) (ClusterFlags, NICFlags, error) {
		var c ClusterFlags
		var n NICFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.Register(fs, ClusterUsage{Cmd: "t", Member: "host", Transports: "tcp", Allowed: []string{"tcp"}})
		n.Register(fs)
		if err := fs.Parse(args); err != nil {
			return c, n, err
		}
		if err := c.Check(); err != nil {
			return c, n, err
		}
		return c, n, n.Check()
	}
	c, n, err := parse()
	if err != nil || c.Procs != ProcsOne {
		t.Errorf("default: procs %q, %v", c.Procs, err)
	}
	if got := n.VnicdMode("udp"); got != "none started (-fast udp)" {
		t.Errorf("-fast udp: vnicd %q", got)
	}
	c, n, err = parse("-procs", "per-host", "-fast", "fabric", "-fabric-idle", "busy")
	if err != nil || c.Procs != ProcsPerHost {
		t.Errorf("-procs per-host: %q, %v", c.Procs, err)
	}
	if got := n.VnicdMode(c.Fast); got != "busy-polling" {
		t.Errorf("-fabric-idle busy: vnicd %q", got)
	}
	if _, _, err := parse("-procs", "two"); err == nil {
		t.Error("-procs two was taken")
	}
}
