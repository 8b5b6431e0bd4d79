package daemon_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
)

// logLines parses the JSON log lines written to logs so far.
func logLines(t *testing.T, logs *testutil.SyncBuffer) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
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
	var logs testutil.SyncBuffer
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
		for _, l := range logLines(t, &logs) {
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
// reserve serves commands, not tenants. With the reserve full, a new root
// connection takes the place of the reserved one idle longest, which is
// closed; the one that sent a request since stays.
func TestReservedConnsForRoot(t *testing.T) {
	requireRoot(t)
	const perUID, reserve = 4, 2
	td := startDaemon(t, testutil.NewPaced(0, time.Hour, 1), func(c *daemon.Config) {
		c.Limits.MaxConnsPerUID, c.Limits.ReservedConns = perUID, reserve
		c.Limits.FirstMessageTimeout = time.Minute
	})
	waitNoConns(t, td)
	var held []*proto.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < perUID+reserve; i++ { // the cap of ordinary connections, then the reserve
		held = append(held, rootStatus(t, td.socket, fmt.Sprintf("with %d idle connections of its uid open", i)))
	}
	if o, r, _ := daemon.ConnCounts(td.d); o != perUID || r != reserve {
		t.Fatalf("%d ordinary and %d reserved connections, want %d and %d", o, r, perUID, reserve)
	}
	var rep proto.AttachReply
	if _, err := held[perUID].Call(proto.TAttach, proto.Attach{Queues: 1, Name: "r"}, &rep); err == nil || !strings.Contains(err.Error(), "--reserved-conns") {
		t.Fatalf("attach on a reserved connection: %v", err)
	}
	// held[perUID+1] has gone longest without a request: the attach came
	// after its status.
	c := rootStatus(t, td.socket, "with its uid's cap and its reserve full")
	defer c.Close()
	held[perUID+1].Unix().SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, _, err := held[perUID+1].Recv(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the reserved connection idle longest: %v, want it closed", err)
	}
	if err := status(held[perUID]); err != nil {
		t.Fatalf("the reserved connection that sent a request since: %v", err)
	}
	ctl := td.d.Stats().Control
	if got, ev := ctl["conns_admitted_reserved"], ctl["conns_evicted_reserved"]; got != reserve+1 || ev != 1 {
		t.Fatalf("conns_admitted_reserved %d, conns_evicted_reserved %d; want %d, 1", got, ev, reserve+1)
	}
}
