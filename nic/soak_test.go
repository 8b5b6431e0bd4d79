package nic_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

// soakDuration is how long TestSoakMixedMigrating runs: VNIC_SOAK_DURATION
// (make soak sets 10m), else a one-second smoke run.
func soakDuration(t *testing.T) time.Duration {
	if d := testutil.KnobsFor(t).SoakDuration; d > 0 {
		return d
	}
	return time.Second
}

// TestSoakMixedMigrating runs the real engine (pinned to CPU 0) and four
// consumers (sharing CPU 1, each touching every byte of every packet, as a
// NAT checksum update would) for a long interval: IMIX frames at 1 Mpps
// offered whose per-queue load migrates (synth.Migrating: 2% of the traffic
// moves between queues every 10 ms), under rxbisect and dynshring in turn,
// with the buffer conservation checker on every move. It checks that every
// frame is accounted for (offered = delivered + counted drops), that the
// application received every delivered frame, that no buffer was lost and
// that no order error occurred.
func TestSoakMixedMigrating(t *testing.T) {
	total := soakDuration(t)
	for _, m := range []nic.Model{nic.RxBisect, nic.DynShRing} {
		t.Run(m.String(), func(t *testing.T) { soak(t, m, total/2) })
	}
}

func soak(t *testing.T, m nic.Model, d time.Duration) {
	const queues = 4
	r := newRig(t, rigConfig{model: m, queues: queues, axSize: 128, bxSize: 1024, bufs: queues*128 + queues*64, foldEvery: 16})
	prof := synth.Migrating(queues, 4096, 0.02, 0.5, 11)
	prof.Interval = 10 * time.Millisecond
	g := gen(t, r, synth.Config{Sizes: synth.IMIX, Flows: 1024, Dist: synth.Replay, Profile: prof, Rate: 1e6, Bucket: 64, Seed: 12})
	var stop atomic.Bool
	var sum atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer pin(1)()
		pk := make([]client.Packet, 0, 32)
		var acc uint64
		for !stop.Load() {
			for q := 0; q < queues; q++ {
				pk, _ = r.cl.Queue(q).Recv(pk[:0])
				for _, p := range pk {
					for _, b := range p.Data {
						acc += uint64(b)
					}
				}
				r.cl.Queue(q).Release(pk)
			}
		}
		sum.Store(acc)
	}()
	unpin := pin(0)
	frames := make([][]byte, 0, 32)
	var offered uint64
	start := time.Now()
	for time.Since(start) < d {
		frames = g.Next(frames[:0])
		r.eng.Step(frames)
		offered += uint64(len(frames))
	}
	r.eng.Fold()
	unpin()
	stop.Store(true)
	<-done
	r.audit()
	s := r.sum(shm.NICBlock)
	cl := r.sum(shm.ClientBlock)
	t.Logf("%s for %v: %d IMIX frames offered, %d delivered (%.2f Mpps), %d dropped (bx_full %d, ax_starved %d), %d borrows, %d dynshring switches, %d bytes touched",
		m, d, offered, s[counters.Packets], float64(s[counters.Packets])/d.Seconds()/1e6, s.Drops(),
		s[counters.DropBxFull], s[counters.DropAxStarved], s[counters.BorrowsIn], s[counters.DynSwitches], s[counters.Bytes])
	if got := s[counters.Packets] + s.Drops(); got != offered {
		t.Fatalf("offered %d, delivered + drops = %d", offered, got)
	}
	if cl[counters.Received] != s[counters.Packets] || cl[counters.OrderErrors] != 0 {
		t.Fatalf("delivered %d, received %d, %d order errors", s[counters.Packets], cl[counters.Received], cl[counters.OrderErrors])
	}
	if s[counters.Packets] == 0 || sum.Load() == 0 {
		t.Fatal("nothing was delivered")
	}
}
