package daemon_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
)

// syncBuffer is a log sink the daemon's goroutines may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestOversizedRequestsLogBounded: 200 connections that each send an
// oversized request leave a bounded number of warnings (the burst per
// interval), and the rest is reported as a count of suppressed lines.
func TestOversizedRequestsLogBounded(t *testing.T) {
	var logs syncBuffer
	const burst, interval = 5, 300 * time.Millisecond
	td := startDaemon(t, testutil.NewPaced(0, time.Hour, 1), func(c *daemon.Config) {
		c.Log = zerolog.New(&logs)
		c.Limits.LogBurst, c.Limits.LogInterval = burst, interval
	})
	const n = 200
	start := time.Now()
	big := make([]byte, proto.MaxRequest+1024)
	for i := 0; i < n; i++ {
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: td.socket, Net: "unixpacket"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(big); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 1<<16)
		for { // the error reply, then the close
			if _, err := c.Read(buf); err != nil {
				break
			}
		}
		c.Close()
	}
	elapsed := time.Since(start)
	const msg = "client sent an oversized request; disconnecting it"
	count := func() (logged int, suppressed uint64) {
		for _, l := range logs.lines(t) {
			switch {
			case l["message"] == msg:
				logged++
				if v, ok := l["suppressed_before"].(float64); ok {
					suppressed += uint64(v)
				}
			case l["reason"] == msg:
				suppressed += uint64(l["suppressed"].(float64))
			}
		}
		return
	}
	testutil.WaitFor(t, 10*time.Second, "every frame received or counted as starved", func() bool { l, s := count(); return uint64(l)+s == n })
	logged, suppressed := count()
	windows := int(elapsed/interval) + 2
	if logged > burst*windows || logged >= n/2 {
		t.Fatalf("%d oversized-request warnings for %d requests in %v, want at most %d per %v", logged, n, elapsed, burst, interval)
	}
	if got := td.d.Stats().Control["log_lines_suppressed"]; got != suppressed {
		t.Fatalf("log_lines_suppressed %d, the summaries say %d", got, suppressed)
	}
	t.Logf("%d requests in %v: %d lines logged, %d suppressed and summarised", n, elapsed.Round(time.Millisecond), logged, suppressed)
}

// TestReservedConnsForRoot: a uid that holds its per-uid cap of idle
// control connections cannot lock root out: root's status still answers
// on a reserved connection (up to --reserved-conns of them), and the
// reserve serves commands, not tenants.
func TestReservedConnsForRoot(t *testing.T) {
	if uid := os.Getuid(); uid != 0 {
		t.Skipf("needs uid 0 (the reserve serves root and vnicd's uid; the test process is uid %d)", uid)
	}
	const perUID, reserve = 4, 2
	td := startDaemon(t, testutil.NewPaced(0, time.Hour, 1), func(c *daemon.Config) {
		c.Limits.MaxConnsPerUID, c.Limits.ReservedConns = perUID, reserve
		c.Limits.FirstMessageTimeout = time.Minute
	})
	status := func(c *proto.Conn) error {
		c.Timeout = 5 * time.Second
		var st proto.Status
		_, err := c.Call(proto.TStatus, nil, &st)
		return err
	}
	var held []*proto.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < perUID; i++ { // the cap of ordinary connections, then idle
		c, err := proto.Dial(td.socket)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if err := status(c); err != nil {
			t.Fatalf("ordinary connection %d: %v", i, err)
		}
	}
	for i := 0; i < reserve; i++ {
		// A connection that closed just before (startDaemon's readiness
		// probe) leaves the count when its goroutine ends, a moment
		// later: retry briefly before calling root locked out.
		var err error
		for try := 0; try < 20; try++ {
			var c *proto.Conn
			if c, err = proto.Dial(td.socket); err != nil {
				t.Fatal(err)
			}
			if err = status(c); err == nil {
				held = append(held, c)
				break
			}
			c.Close()
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("root locked out with %d idle connections of its uid open: reserved connection %d: %v", perUID+i, i, err)
		}
	}
	var rep proto.AttachReply
	if _, err := held[perUID].Call(proto.TAttach, proto.Attach{Queues: 1, Name: "r"}, &rep); err == nil || !strings.Contains(err.Error(), "--reserved-conns") {
		t.Fatalf("attach on a reserved connection: %v", err)
	}
	c, err := proto.Dial(td.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Refused at accept: the error comes unasked, then the close.
	c.Unix().SetReadDeadline(time.Now().Add(5 * time.Second))
	if typ, body, _, err := c.Recv(); err != nil || typ != proto.TError || !strings.Contains(string(body), "--max-conns-per-uid") {
		t.Fatalf("a connection past the cap and the reserve: type %d, %q, %v", typ, body, err)
	}
	if got := td.d.Stats().Control["conns_admitted_reserved"]; got != reserve {
		t.Fatalf("conns_admitted_reserved %d, want %d", got, reserve)
	}
}
