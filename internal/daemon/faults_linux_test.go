package daemon_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/testutil"
)

// TestHolePunchDetached: a tenant punches holes in its buffer section in a
// loop while it receives. The engine's faults give it away: it is detached,
// counted and logged; the good tenant stays attached and loses nothing.
func TestHolePunchDetached(t *testing.T) {
	src := testutil.NewPaced(100000, 200*time.Microsecond, 5000, 6000)
	var logs testutil.SyncBuffer
	td := startDaemon(t, src, func(c *daemon.Config) { c.Log = zerolog.New(&logs) })
	ctx := context.Background()
	good, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "good", Match: client.Match{DstPortLo: 5000, DstPortHi: 5000}})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	bad, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "bad", Match: client.Match{DstPortLo: 6000, DstPortHi: 6000}})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	var gotGood, gotBad atomic.Int64
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); receive(rctx, good.Queue(0), &gotGood) }()
	go func() { defer wg.Done(); receive(rctx, bad.Queue(0), &gotBad) }()
	var punches, punchErrs atomic.Int64
	go func() {
		// The offender: its buffer section, punched over and over (its
		// rings stay intact, so nothing else gives it away).
		defer wg.Done()
		fd := bad.Region.FD()
		off, n := int64(bad.Region.Lay.Buf), int64(bad.Region.Lay.BufBytes)
		for end := time.Now().Add(10 * time.Second); rctx.Err() == nil && bad.Err() == nil && time.Now().Before(end); {
			if unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n) != nil {
				punchErrs.Add(1)
			}
			punches.Add(1)
			time.Sleep(100 * time.Microsecond)
		}
	}()
	defer wg.Wait()
	defer stop()
	src.Open()
	testutil.WaitFor(t, 10*time.Second, "bad.Err() != nil", func() bool { return bad.Err() != nil })
	t.Logf("offender: %d punches (%d failed), received %d frames; its error: %v", punches.Load(), punchErrs.Load(), gotBad.Load(), bad.Err())
	testutil.WaitFor(t, 20*time.Second, "the good tenant to account for its frames", func() bool {
		return src.Sent() == 100000 && accounted(td, "good", src.SentTo(5000), &gotGood)
	})
	st := td.d.Stats()
	t.Logf("control: engine_page_faults %d, engine_page_fault_alerts %d, hole_looks %d, tenants_detached_punched_holes %d",
		st.Control["engine_page_faults"], st.Control["engine_page_fault_alerts"], st.Control["hole_looks"], st.Control["tenants_detached_punched_holes"])
	if n := st.Control["tenants_detached_punched_holes"]; n != 1 {
		t.Fatalf("tenants_detached_punched_holes = %d, want 1", n)
	}
	if len(st.Tenants) != 1 || st.Tenants[0].Name != "good" || st.Tenants[0].Faulty != "" {
		t.Fatalf("live tenants %+v, want the good one only, healthy", st.Tenants)
	}
	if len(st.History) != 1 || st.History[0].Name != "bad" || !strings.Contains(st.History[0].Faulty, "punched a hole") {
		t.Fatalf("history %+v, want the offender, detached for punching holes", st.History)
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "punched holes") {
			if line != "" {
				t.Fatalf("more than one log line about the offender:\n%s\n%s", line, l)
			}
			line = l
		}
	}
	if !strings.Contains(line, `"level":"warn"`) || !strings.Contains(line, `"name":"bad"`) || !strings.Contains(line, "must never punch") {
		t.Fatalf("want one warning naming the offender and what it must do, got %q", line)
	}
	if gotGood.Load() == 0 {
		t.Fatal("the good tenant received nothing")
	}
}
