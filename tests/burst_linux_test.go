//go:build linux

package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/proto"
)

// startVnicdDefaults runs vnicd in the DUT namespace with nothing but what
// it needs to find the testbed: the interface, the socket, no metrics and
// (claimAll: the testbed is the test's own) every frame claimed. Ring,
// buffer, CPU and timing settings stay at vnicd's defaults.
func (b *bed) startVnicdDefaults(claimAll bool) {
	b.t.Helper()
	args := []string{"run", "--source", "xsk",
		"--iface", b.link().DUTIf, "--socket", b.socket, "--metrics-addr", "", "--log-format", "json"}
	if claimAll {
		args = append(args, "--claim-all")
	}
	b.startVnicdWith(args)
}

// TestIntegrationBurstAtDefaults sends bursts of 20,000 frames back to
// back (trafgen's -b shaper at 20,000 pps sends a second's frames at its
// full speed, then sleeps) to vnicd at its defaults, and requires every
// frame delivered: a real sender's burst must fit in the rings vnicd and
// the client library size by default. Two tenants: one attached with
// default options (one queue, every frame), and the README's quickstart
// (four queues, UDP to 9000-9099, which XDP then claims alone). The
// ledger (sent = delivered + each counted drop) says where any frame was
// lost.
func TestIntegrationBurstAtDefaults(t *testing.T) {
	for _, c := range []struct {
		name     string
		claimAll bool
		opts     client.AttachOptions
	}{
		{"default-options", true, client.AttachOptions{Name: "burst", Match: client.Match{Default: true}}},
		{"quickstart", false, client.AttachOptions{Name: "burst", Queues: 4, Match: client.Match{Proto: "udp", DstPortLo: 9000, DstPortHi: 9099}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBed(t, 2)
			b.startVnicdDefaults(c.claimAll)
			ten, err := client.Attach(context.Background(), b.socket, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer ten.Close()
			r := receive(ten, nil)
			defer r.close() // before the tenant is closed: a Queue must be idle then
			const n = 20000
			for burst := 1; burst <= 3; burst++ {
				before := b.ledger("burst")
				b.trafgen(n, n, 10000, 10063, 9000)
				l := b.settle("burst", before.XDP+before.XDPPass+n, &r.got)
				st := b.stats()
				t.Logf("burst %d: sent %d: xdp %d (+%d passed), af_xdp %d (+%d dropped), engine %d, tenant delivered %d + %d dropped, app %d; load %s",
					burst, n, l.XDP-before.XDP, l.XDPPass-before.XDPPass, l.XskRx-before.XskRx, l.XskDrop-before.XskDrop, l.Engine-before.Engine,
					l.Delivered-before.Delivered, l.Drops-before.Drops, r.got.Load(), loadavg())
				if got := l.Delivered - before.Delivered; got != n {
					t.Fatalf("burst %d: %d of %d frames delivered at vnicd's defaults; lost: %s\n%s", burst, got, n, lossPlaces(st), b.logTail())
				}
				time.Sleep(200 * time.Millisecond) // the engine and the tenant go back to sleep
			}
			if err := r.close(); err != nil {
				t.Fatal(err)
			}
			g := ten.Region.Geo
			// What the sized rings cost: vnicd's resident memory (the AF_XDP
			// UMEM the kernel has written, the tenant's region) and the
			// tenant's geometry.
			t.Logf("vnicd resident %s; tenant: %d queue(s), Ax %d, Bx %d, %d buffers, region %d MiB",
				vmRSS(b.vnicd.Pid), ten.Queues(), g.AxSize, g.BxSize, g.BufCount, g.Layout().Total>>20)
		})
	}
}

// vmRSS is a process's resident set size from /proc/<pid>/status.
func vmRSS(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// lossPlaces names the non-zero drop counters of a stats reply.
func lossPlaces(st proto.Stats) string {
	s := ""
	for _, k := range []string{"xsk_rx_dropped", "xsk_rx_ring_full", "xsk_rx_fill_ring_empty_descs", "xsk_rx_too_long", "xdp_pass_no_socket"} {
		if v := st.Source[k]; v != 0 {
			s += fmt.Sprintf("%s %d, ", k, v)
		}
	}
	for k, v := range st.Global {
		if v != 0 && len(k) > 6 && k[:6] == "drops_" {
			s += fmt.Sprintf("%s %d, ", k, v)
		}
	}
	for _, tn := range st.Tenants {
		for q, rg := range tn.Rings {
			for _, k := range []string{"drops_bx_full", "drops_ax_starved", "drops_faulty"} {
				if v := rg.NIC[k]; v != 0 {
					s += fmt.Sprintf("%s q%d %s %d, ", tn.Name, q, k, v)
				}
			}
		}
	}
	if s == "" {
		return "no drop counted"
	}
	return s[:len(s)-2]
}

// loadavg is the machine's 1-, 5- and 15-minute load, for the log.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := string(b)
	for i, n := 0, 0; i < len(f); i++ {
		if f[i] == ' ' {
			if n++; n == 3 {
				return f[:i]
			}
		}
	}
	return f
}
