package main

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
	"github.com/vnic/vnic/tools/examples/internal/casestudy"
	"github.com/vnic/vnic/tools/examples/internal/casestudy/casestudytest"
)

// Quorum replication over both replication networks, with one secondary
// of two killed half-way through: the primary goes on with its quorum
// (itself and the live secondary), every acknowledged update is on every
// live replica under its version, dependent updates of a key keep their
// order, and nothing offered goes unanswered. The bi-channel runs on an
// in-process network that loses, duplicates and reorders 5% of the
// datagrams, with its acknowledgements on the fast path (hot, the paper's
// mode: quorum counted from them, copies to the replica outside the quorum
// abandoned, the updates of a skipped copy fetched by its secondary) or in
// the TCP control path (bi).
func TestKVQuorumOneReplicaDead(t *testing.T) {
	for _, tr := range []string{"hot", "bi", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			cfg := ClusterConfig{Shards: 2, Sizing: Sizing{Keys: 50, Updates: 6000}, ClusterConfig: casestudy.ClusterConfig{Places: casestudy.Loopback(3), Transport: tr,
				Bi: bichannel.Config{Flows: 2, BuffersPerFlow: 64, RetransmitTimeout: 10 * time.Millisecond,
					HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 5 * time.Second}}}
			if tr != "tcp" {
				_, cfg.FastPath = casestudytest.LossyNet(t, lossytest.Config{Loss: 0.05, Duplicate: 0.05, Reorder: 0.05, Seed: 11}, cfg.Shards)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cl, err := NewCluster(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			var killedAt time.Time
			res, err := Load(ctx, LoadConfig{Addr: cl.ClientAddr, Rate: 4000, Duration: 1500 * time.Millisecond, Conns: 2, Keys: 50,
				Seed: 1, KeepAcked: true, OnHalf: func() { killedAt = time.Now(); cl.Kill(2) }})
			if err != nil {
				t.Fatal(err)
			}
			if killedAt.IsZero() {
				t.Fatal("secondary 2 was never killed")
			}
			t.Logf("%d offered, %d answered in %v, p50 %v p99 %v; live nodes %v",
				res.Offered, res.Answered, res.Elapsed.Round(time.Millisecond), res.Service.Quantile(0.5), res.Service.Quantile(0.99), cl.Live())
			if res.Answered != res.Offered || res.Offered < 5000 {
				t.Fatalf("%d of %d updates answered", res.Answered, res.Offered)
			}
			if res.OrderErrors != 0 {
				t.Errorf("%d dependent updates answered out of order", res.OrderErrors)
			}
			if err := cl.CatchUp(10 * time.Second); err != nil {
				t.Fatal(err)
			}
			if err := cl.Check(res.Acked); err != nil {
				t.Fatal(err)
			}
			if e := cl.Endpoint(0); e != nil {
				s := e.Stats()
				var fetched uint64
				for _, r := range cl.Secondary[1].Shard {
					r.mu.Lock()
					fetched += r.Fetched
					r.mu.Unlock()
				}
				t.Logf("primary: hot acks taken %d, resent fast %d, over TCP %d, abandoned %d; secondary 1 fetched %d updates of skipped messages",
					s.HotAcksReceived, s.FastRetransmitted, s.Retransmitted, s.Abandoned, fetched)
				if tr == "hot" && (s.HotAcksReceived == 0 || s.FastRetransmitted == 0) {
					t.Errorf("hot mode: %d hot acknowledgements taken, %d fast retransmissions", s.HotAcksReceived, s.FastRetransmitted)
				}
				if tr == "bi" && s.HotAcksReceived != 0 {
					t.Errorf("TCP-ack mode took %d hot acknowledgements", s.HotAcksReceived)
				}
			}
			// The check sees a lost acknowledged update.
			a := res.Acked[len(res.Acked)/2]
			r := cl.Secondary[1].Shard[ShardOf(a.Key, cfg.Shards)]
			r.mu.Lock()
			r.Log.At(int(a.Version - 1)).Value[0] ^= 1
			r.mu.Unlock()
			if err := cl.Check(res.Acked); err == nil {
				t.Error("Check missed a corrupted acknowledged update on secondary 1")
			}
			// Keys were updated again and again: the check saw dependent
			// updates, on the primary and the surviving secondary.
			if len(res.Acked) <= 50*10 {
				t.Fatalf("only %d acknowledged updates", len(res.Acked))
			}
		})
	}
}

// TestLoadRateNotAboveOffered: against a server that answers at once, the
// load generator offers exactly rate × duration updates and reports at
// most the offered rate as answered (it once offered one more per
// connection and printed 2,001 answered/s for 2,000 offered).
func TestLoadRateNotAboveOffered(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var req [ReqLen]byte
				var rep [ReplyLen]byte
				for ver := uint64(1); ; ver++ {
					if _, err := io.ReadFull(c, req[:]); err != nil {
						return
					}
					copy(rep[:8], req[:8])
					binary.LittleEndian.PutUint64(rep[8:], ver)
					if _, err := c.Write(rep[:]); err != nil {
						return
					}
				}
			}()
		}
	}()
	for _, conns := range []int{1, 3} {
		res, err := Load(context.Background(), LoadConfig{Addr: ln.Addr().String(), Rate: 2000, Duration: time.Second, Conns: conns, Keys: 10, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Offered > 2000 || res.Offered < 1997 || res.Answered != res.Offered {
			t.Errorf("%d connections: %d offered, %d answered for 2,000/s over 1 s", conns, res.Offered, res.Answered)
		}
		if tp := res.Throughput(); tp > 2000 || tp < 1900 {
			t.Errorf("%d connections: %.1f answered/s for 2,000 offered", conns, tp)
		}
	}
}

// TestPlotLatencyYLabels: latencies within one decade (here 150 to 900 µs)
// still get several labelled ticks on the log axis, not one.
func TestPlotLatencyYLabels(t *testing.T) {
	var rows []Row
	for i, tr := range []string{"hot", "tcp"} {
		for k := 1; k <= 4; k++ {
			f := float64(k + 2*i)
			rows = append(rows, Row{Transport: tr, Throughput: 1000 * f, Service: Lat{Count: 1, P50: 150 + 10*f, P95: 300 + 40*f, P99: 500 + 50*f}})
		}
	}
	p, err := latencyPlot(rows)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, tk := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		if tk.Label != "" && tk.Value >= p.Y.Min && tk.Value <= p.Y.Max { // the axis shows no tick outside its range
			labels = append(labels, tk.Label)
		}
	}
	if len(labels) < 2 {
		t.Fatalf("y axis from %.0f to %.0f µs has the labels %q", p.Y.Min, p.Y.Max, labels)
	}
	if err := PlotLatency(rows, t.TempDir()+"/kv.svg"); err != nil {
		t.Fatal(err)
	}
}
