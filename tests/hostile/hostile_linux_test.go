package hostile

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/testutil"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SETUID) to run the attackers as another uid than the operator's probes")
	}
}

// TestIntegrationHostileIdleConnections: 2,000 connections that never send
// from one uid. The per-uid cap refuses all but 64 at once, the first-message
// deadline closes those, and nothing of them stays.
func TestIntegrationHostileIdleConnections(t *testing.T) {
	needRoot(t)
	h := start(t, nil, "--first-message-timeout", "1s")
	h.attack("2000 idle connections", func() {
		c := h.child("idle", params{N: 2000})
		time.Sleep(1500 * time.Millisecond) // past the first-message deadline
		t.Logf("attacker: %s", c.stop())
	})
	ctl := h.stats().Control
	t.Logf("control counters: %v", ctl)
	// Every attacker connection was refused by the cap or closed by the
	// deadline (on a slow run the deadline frees slots while the attacker
	// is still connecting, so the split varies).
	if r, d := ctl["conns_refused_uid_limit"], ctl["first_message_timeouts"]; r+d < 1990 || r < 1000 || d < 60 {
		t.Fatalf("want the 2000 connections refused by the per-uid cap (most) or closed by the first-message deadline (at least 64): %v", ctl)
	}
}

// TestIntegrationHostileBigMessages: 256 connections each send one 1 MiB
// datagram (an attack that once grew vnicd from 28 to 555 MB). vnicd reads the length only,
// refuses and closes; its RSS stays put.
func TestIntegrationHostileBigMessages(t *testing.T) {
	needRoot(t)
	h := start(t, nil, "--max-conns-per-uid", "300")
	var peak int64
	h.attack("256 connections x one 1 MiB datagram", func() {
		c := h.child("big", params{N: 256, Bytes: 1 << 20})
		peak = h.rss()
		time.Sleep(200 * time.Millisecond)
		peak = max(peak, h.rss())
		t.Logf("attacker: %s", c.stop())
	})
	ctl := h.stats().Control
	t.Logf("vnicd RSS %d KiB before, %d KiB during the attack; control counters: %v", h.baseRSS>>10, peak>>10, ctl)
	if ctl["requests_too_large"] < 200 {
		t.Fatalf("want ~256 requests refused as too large: %v", ctl)
	}
	if peak > h.baseRSS+h.rssSlack {
		t.Fatalf("vnicd's RSS rose from %d to %d KiB under the attack", h.baseRSS>>10, peak>>10)
	}
}

// TestIntegrationHostileNoReaders: 30 peers pipeline 300 stats requests
// each and never read a reply, then go away. vnicd disconnects them at the
// reply deadline and does not go on writing into dead sockets.
func TestIntegrationHostileNoReaders(t *testing.T) {
	needRoot(t)
	h := start(t, nil, "--reply-timeout", "500ms")
	h.attack("30 peers x 300 unread stats requests", func() {
		c := h.child("noread", params{N: 30, Repeat: 300, Timeout: 1500 * time.Millisecond})
		t.Logf("attacker: %s", c.stop())
	})
	ctl := h.stats().Control
	t.Logf("control counters: %v", ctl)
	if ctl["reply_timeouts"] < 25 {
		t.Fatalf("want the ~30 non-reading peers disconnected at the reply deadline: %v", ctl)
	}
}

// TestIntegrationHostileAcceptErrors: vnicd under a 128-descriptor limit
// and caps above it, 400 idle connections: accept fails with EMFILE, vnicd
// warns, counts, backs off and keeps serving; afterwards it answers again.
// (While the descriptor table is full nobody can connect, the operator
// included: that is what --max-conns below the limit prevents, so status is
// required only before and after here.)
func TestIntegrationHostileAcceptErrors(t *testing.T) {
	needRoot(t)
	h := start(t, []string{"sh", "-c", `ulimit -n 128 && exec "$0" "$@"`}, "--max-conns", "1000", "--max-conns-per-uid", "1000", "--first-message-timeout", "1s")
	h.attack("400 idle connections past the descriptor limit", func() {
		h.strict.Store(false)
		var conns []net.Conn
		for i := 0; i < 400; i++ {
			c, err := net.DialTimeout("unixpacket", h.socket, 50*time.Millisecond)
			if err != nil {
				continue
			}
			conns = append(conns, c)
		}
		time.Sleep(500 * time.Millisecond)
		for _, c := range conns {
			c.Close()
		}
		time.Sleep(1500 * time.Millisecond) // the backlog drains, the deadline closes the rest
		h.strict.Store(true)
	})
	ctl := h.stats().Control
	t.Logf("control counters: %v", ctl)
	if ctl["accept_errors"] == 0 {
		t.Fatalf("no accept error counted: %v", ctl)
	}
	if !strings.Contains(h.log(), `"level":"warn"`) || !strings.Contains(h.log(), "accept failed") {
		t.Fatal("accept errors were not logged at warn")
	}
}

// TestIntegrationHostileMemory: one uid attaches as many large tenants as
// it can. The region cap, the memory budget and the per-uid quota refuse
// the rest with sentences naming the flag; a huge geometry and an int
// overflow are refused before any memory is taken.
func TestIntegrationHostileMemory(t *testing.T) {
	needRoot(t)
	h := start(t, nil, "--max-region", "64MiB", "--memory-budget", "256MiB", "--max-tenants-per-uid", "8")
	h.attack("attach 64 tenants of ~40 MiB, then oversized ones", func() {
		c := h.child("attach", params{N: 64, Attach: client.AttachOptions{Name: "hog", Queues: 4, Buffers: 20000, Match: client.Match{DstPortLo: 1000}}})
		ready := c.stop()
		t.Logf("attacker (fits): %s", ready)
		c2 := h.child("attach", params{N: 3, Attach: client.AttachOptions{Name: "huge", Queues: 64, AxSize: 1 << 24, BxSize: 1 << 24, Buffers: 1 << 22, Match: client.Match{DstPortLo: 2000}}})
		t.Logf("attacker (huge): %s", c2.stop())
	})
	ctl := h.stats().Control
	t.Logf("control counters: %v", ctl)
	if ctl["attach_refused_memory_budget"] == 0 || ctl["attach_refused_region_limit"] == 0 {
		t.Fatalf("want refusals by the memory budget and the region cap: %v", ctl)
	}
	// The per-uid quota, with small tenants.
	h.attack("attach 64 small tenants from one uid", func() {
		c := h.child("attach", params{N: 64, Attach: client.AttachOptions{Name: "many", Queues: 1, AxSize: 8, BxSize: 8, TxSize: 8, Match: client.Match{DstPortLo: 3000}}})
		t.Logf("attacker: %s", c.stop())
	})
	ctl = h.stats().Control
	if ctl["attach_refused_uid_limit"] < 56 {
		t.Fatalf("want >= 56 attaches refused by the per-uid quota: %v", ctl)
	}
}

var _ = context.Background
var _ = fmt.Sprint

// TestIntegrationHostileMaxima: 8 tenants of 64 queues with 64-byte names
// (7 from one uid plus the good tenant), then a history behind another 7:
// every stats reply spans several pages (one 64-queue tenant is ~97 KB of
// JSON); vnicctl tenants, rings, counters and watch all answer, while the
// good tenant keeps its rate. With VNIC_SOAK=1 (make soak) it runs at the
// maxima: 64 tenants and a full history.
func TestIntegrationHostileMaxima(t *testing.T) {
	needRoot(t)
	n := 7
	if testutil.KnobsFor(t).Soak {
		n = 63
	}
	h := start(t, nil, "--max-tenants-per-uid", "64", "--max-conns-per-uid", "200", "--first-message-timeout", "10s")
	// The history keeps every counter of every ring of up to 64 tenants
	// (64 x 64 x 2 blocks): more heap after the attack than before.
	h.rssSlack = 64 << 20
	name := "m" + strings.Repeat("x", 60) // + up to 2 digits: 63 bytes
	opts := client.AttachOptions{Name: name, Queues: 64, AxSize: 2, BxSize: 2, TxSize: 2, Match: client.Match{Proto: "udp", DstPortLo: 100}}
	ctl := func(args ...string) string {
		t.Helper()
		t0 := time.Now()
		out, err := exec.Command(vnicctlBin, append([]string{"--socket", h.socket}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("vnicctl %v: %v:\n%s", args, err, testutil.Tail(string(out), 10))
		}
		t.Logf("vnicctl %s: %d bytes of output in %v", strings.Join(args, " "), len(out), time.Since(t0).Round(time.Millisecond))
		return string(out)
	}
	last := fmt.Sprintf("%s%d", name, n-1)
	check := func() {
		t.Helper()
		for _, args := range [][]string{{"tenants", "-o", "wide"}, {"rings"}, {"counters"}, {"counters", "-o", "json"}, {"watch", "-o", "wide", "--interval", "200ms", "--count", "1"}} {
			if out := ctl(args...); !strings.Contains(out, last) {
				t.Errorf("vnicctl %v does not show %s:\n%s", args, last, testutil.Tail(out, 5))
			}
		}
	}
	h.attack(fmt.Sprintf("%d tenants x 64 queues, then %d more behind them in the history", n, n), func() {
		c := h.child("attach", params{N: n, Attach: opts})
		check()
		t.Logf("attacker: %s", c.stop())
		c = h.child("attach", params{N: n, Attach: opts})
		check()
		st := h.stats()
		if len(st.Tenants) != n+1 || len(st.History) != n {
			t.Errorf("want %d live tenants and %d in the history, got %d and %d", n+1, n, len(st.Tenants), len(st.History))
		}
		t.Logf("attacker: %s", c.stop())
	})
}

// TestIntegrationHostileHolePunch: a tenant that receives punches holes
// into its buffer section in a loop, for up to 5 s. vnicd's tenant regions
// are ordinary shared memory (hugetlb only with --tenant-huge-pages), so
// each frame the engine writes there costs it a page fault, on the thread
// that serves every tenant. vnicd finds the offender from its engine's
// faults and detaches it (counted, one log line); it survives, and the
// good tenant keeps >= 90% of its rate in every 250 ms window.
func TestIntegrationHostileHolePunch(t *testing.T) {
	needRoot(t)
	h := start(t, nil)
	var win *windows
	h.attack("hole punching in a tenant's buffer section for up to 5 s", func() {
		win = h.sample(250 * time.Millisecond)
		c := h.child("punch", params{Timeout: 5 * time.Second, Attach: client.AttachOptions{Name: "puncher", Queues: 2, Match: client.Match{Proto: "udp", DstPortLo: 65535 - 100, DstPortHi: 65535}}})
		t.Logf("attacker: %s", c.stop())
		win.observe(2*time.Second, 8*time.Second) // windows after the detach too
		win.stop()
	})
	st := h.stats()
	t.Logf("control: engine_page_faults %d, engine_page_fault_alerts %d, hole_looks %d, tenants_detached_punched_holes %d",
		st.Control["engine_page_faults"], st.Control["engine_page_fault_alerts"], st.Control["hole_looks"], st.Control["tenants_detached_punched_holes"])
	if n := st.Control["tenants_detached_punched_holes"]; n != 1 {
		t.Errorf("tenants_detached_punched_holes = %d, want 1 (the puncher)", n)
	}
	for _, x := range st.Tenants {
		if x.Name == "puncher" {
			t.Errorf("the puncher is still attached")
		}
	}
	found := false
	for _, x := range st.History {
		if x.Name == "puncher" {
			found = true
			var pk uint64
			for _, r := range x.Rings {
				pk += r.NIC["packets"]
			}
			t.Logf("puncher: %d frames delivered to it; detached: %q", pk, x.Faulty)
			if !strings.Contains(x.Faulty, "punched a hole") {
				t.Errorf("the puncher's history entry does not say it punched holes: %q", x.Faulty)
			}
		}
	}
	if !found {
		t.Errorf("the puncher is not in the history")
	}
	if n := strings.Count(h.log(), "tenant punched holes in its shared-memory region"); n != 1 {
		t.Errorf("want one log line about the puncher, got %d:\n%s", n, testutil.Tail(h.log(), 10))
	}
	win.check(t, h.baseRate, 0.9)
	h.census()
}
