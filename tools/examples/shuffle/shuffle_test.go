package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
	"github.com/vnic/vnic/internal/splitmix"
	"github.com/vnic/vnic/tools/examples/internal/casestudy"
	"github.com/vnic/vnic/tools/examples/internal/casestudy/casestudytest"
)

func tables(n, rows int) []*Table {
	ts := make([]*Table, n)
	for i := range ts {
		ts[i] = GenTable(i, rows, 1)
	}
	return ts
}

// testBi is a bi-channel configuration small enough that credits bind and
// retransmissions happen in a short test.
func testBi() bichannel.Config {
	return bichannel.Config{Flows: 4, BuffersPerFlow: 32, RetransmitTimeout: 10 * time.Millisecond,
		HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 5 * time.Second}
}

// The shuffle delivers every row exactly once over the bi-channel on a
// network that loses, duplicates and reorders datagrams, and over kernel
// TCP; 3 hosts, 2 workers each.
func TestShuffleExactlyOnce(t *testing.T) {
	const hosts, rows = 3, 2000
	for _, tc := range []struct {
		name string
		cfg  ClusterConfig
		net  *lossytest.Net
	}{
		{name: "tcp", cfg: ClusterConfig{ClusterConfig: casestudy.ClusterConfig{Transport: "tcp"}}},
		{name: "bi-lossy", cfg: ClusterConfig{ClusterConfig: casestudy.ClusterConfig{Transport: "bi", Bi: testBi()}}},
		{name: "bi-udp", cfg: ClusterConfig{ClusterConfig: casestudy.ClusterConfig{Transport: "bi", Bi: testBi(), Fast: bichannel.FastUDP}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Places, cfg.Workers, cfg.Seed = casestudy.Loopback(hosts), 2, 42
			var ln *lossytest.Net
			if tc.name == "bi-lossy" {
				ln, cfg.FastPath = casestudytest.LossyNet(t, lossytest.Config{Loss: 0.10, Duplicate: 0.10, Reorder: 0.1, Seed: 7}, cfg.Workers)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cl, err := NewCluster(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			// Twice over the same connections: the transports carry on.
			for run := range 2 {
				res, err := cl.Run(ctx, tables(hosts, rows+run))
				if err != nil {
					t.Fatal(err)
				}
				if !res.ExactlyOnce || res.Rows != hosts*uint64(rows+run) {
					t.Fatalf("run %d: %+v", run, res)
				}
				var local uint64
				for h, hr := range res.Hosts {
					local += hr.SentTo[h].Rows
				}
				// murmur3 spreads rows evenly: about a third stay home.
				if f := float64(local) / float64(res.Rows); f < 0.28 || f > 0.39 {
					t.Errorf("%.2f of the rows stayed on their host, want about 1/3", f)
				}
				if res.NetBytes != (res.Rows-local)*TupleLen {
					t.Errorf("%d bytes sent, want %d", res.NetBytes, (res.Rows-local)*TupleLen)
				}
				t.Logf("run %d: %s; %d rows, %.1f MB over the network in %v", run, res.CheckMessage, res.Rows, float64(res.NetBytes)/1e6, res.Elapsed.Round(time.Millisecond))
			}
			if ln != nil {
				st := ln.Stats()
				var retx, dups uint64
				for _, tr := range cl.Transports() {
					s := tr.(BiTransport).E.Stats()
					retx += s.Retransmitted
					dups += s.Duplicates
				}
				t.Logf("network: %+v; retransmitted %d, duplicates suppressed %d", st, retx, dups)
				if st.Lost == 0 || st.Duplicated == 0 || retx == 0 || dups == 0 {
					t.Errorf("the impairment did not bite: lost %d duplicated %d retransmitted %d suppressed %d", st.Lost, st.Duplicated, retx, dups)
				}
			}
		})
	}
}

// A corrupted tally fails the check with a message naming the stream.
func TestShuffleDetectsLoss(t *testing.T) {
	var a, b Tally
	tup := make([]byte, TupleLen)
	GenTable(0, 2, 1).putTuple(tup, 0)
	a.add(tup)
	b.add(tup)
	b.add(tup)
	if a == b {
		t.Fatal("a duplicated row leaves the tally unchanged")
	}
	if got := fmt.Sprint(Partition(1, 0, 3)); got == "" {
		t.Fatal("no partition")
	}
	for _, h := range []int{2, 3, 5, 8} {
		seen := make([]int, h)
		for k := range uint64(30000) {
			p := Partition(splitmix.Mix(k), 9, h)
			if p < 0 || p >= h {
				t.Fatalf("partition %d of %d hosts", p, h)
			}
			seen[p]++
		}
		for p, n := range seen {
			if d := float64(n) / (30000 / float64(h)); d < 0.9 || d > 1.1 {
				t.Errorf("%d hosts: host %d gets %d of 30000 rows", h, p, n)
			}
		}
	}
}
