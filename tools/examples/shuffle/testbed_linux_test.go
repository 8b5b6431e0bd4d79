//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/internal/testbed"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/tools/examples/internal/casestudy"
)

// TestIntegrationShuffleTestbed shuffles among 3 hosts, each in its own
// namespace of a bridged testbed, over the bi-channel (kernel UDP fast
// path) with 10% of every host's frames dropped and 10% duplicated by a BPF
// program on its egress (control path included), then over kernel TCP
// through the same impairment; every row must arrive exactly once.
func TestIntegrationShuffleTestbed(t *testing.T) {
	testutil.RequireNetAdmin(t)
	testutil.RequireBPF(t)
	const hosts, rows = 3, 4000
	cfg := testbed.Config{Prefix: fmt.Sprintf("sh%d", os.Getpid()%10000), Hosts: hosts, Queues: 2}
	tb := testutil.Testbed(t, cfg)
	for _, h := range tb.Hosts {
		ns, err := netns.GetFromName(h.NS)
		if err != nil {
			t.Fatal(err)
		}
		err = testbed.Impair(ns, h.If, 10, 10)
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	places, err := casestudy.TestbedPlaces(cfg.Prefix, hosts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []string{"bi", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cl, err := NewCluster(ctx, ClusterConfig{Workers: 2, Seed: 5, ClusterConfig: casestudy.ClusterConfig{Places: places, Transport: tr, Fast: bichannel.FastUDP, Bi: testBi()}})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			res, err := cl.Run(ctx, tables(hosts, rows))
			if err != nil {
				t.Fatal(err)
			}
			if !res.ExactlyOnce || res.Rows != hosts*rows {
				t.Fatalf("%+v", res)
			}
			t.Logf("%s: %d rows, %.1f MB across the bridge in %v", res.CheckMessage, res.Rows, float64(res.NetBytes)/1e6, res.Elapsed.Round(time.Millisecond))
			if tr != "bi" {
				return
			}
			var st bichannel.Stats
			for _, x := range cl.Transports() {
				s := x.(BiTransport).E.Stats()
				st.Sent += s.Sent
				st.Retransmitted += s.Retransmitted
				st.Duplicates += s.Duplicates
				st.DeliveredTCP += s.DeliveredTCP
				st.DeliveredFast += s.DeliveredFast
			}
			t.Logf("bi-channel: sent %d, delivered fast %d + over TCP %d, retransmitted %d, duplicates suppressed %d",
				st.Sent, st.DeliveredFast, st.DeliveredTCP, st.Retransmitted, st.Duplicates)
			if st.DeliveredFast+st.DeliveredTCP != st.Sent {
				t.Errorf("sent %d, delivered %d", st.Sent, st.DeliveredFast+st.DeliveredTCP)
			}
			if st.DeliveredTCP == 0 || st.Duplicates == 0 {
				t.Errorf("the impairment did not bite: %d delivered over TCP, %d duplicates", st.DeliveredTCP, st.Duplicates)
			}
		})
	}
}
