package nic_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
)

// TestInlinePathAgrees runs the same frames through two engines, one with
// Step's fast path and one sending every frame through the general path
// (nic.StepSlow), over every model and both policies, with
// consumers that drain in the same random pattern, and checks that the
// applications receive the same packets (queue, buffer, bytes, flags,
// hash, stamp), in the same order, and that every counter agrees. The
// traffic mixes IPv4 UDP of many flows and sizes, IPv6, frames longer than
// a buffer (truncated), frames cut short or scribbled (malformed) and
// empty ones.
func TestInlinePathAgrees(t *testing.T) {
	frames := mixedFrames(rand.New(rand.NewPCG(9, 9)), 6000)
	for c := 0; c < 16; c++ {
		r := rand.New(rand.NewPCG(uint64(c), 77))
		cfg := rigConfig{
			model:  nic.Model(c % 4),
			policy: nic.Policy((c / 4) % 2),
			queues: 1 + r.IntN(4),
			axSize: 8 << r.IntN(4),
			bxSize: 16 << r.IntN(4),
			now:    func() uint64 { return 123456789 },
		}
		cfg.shGroup = 1 + r.IntN(cfg.queues)
		if cfg.model == nic.DynShRing {
			cfg.dyn = nic.DynConfig{Window: 64, High: 2, Low: 1.5, Hold: 2}
		}
		cfg.bufs = cfg.queues*cfg.axSize + r.IntN(3*cfg.axSize)
		t.Run(fmt.Sprintf("case%d/%s/%s/q%d/ax%d/bx%d/bufs%d", c, cfg.model, cfg.policy, cfg.queues, cfg.axSize, cfg.bxSize, cfg.bufs), func(t *testing.T) {
			fast, slow := newRig(t, cfg), newRig(t, cfg)
			seed := uint64(c) + 1000
			gotFast := runFrames(t, fast, frames, seed, false)
			gotSlow := runFrames(t, slow, frames, seed, true)
			if len(gotFast) != len(gotSlow) {
				t.Fatalf("inline path delivered %d packets, general path %d", len(gotFast), len(gotSlow))
			}
			for i := range gotFast {
				if gotFast[i] != gotSlow[i] {
					t.Fatalf("packet %d: inline path %s, general path %s", i, gotFast[i], gotSlow[i])
				}
			}
			for _, kind := range []int{shm.NICBlock, shm.ClientBlock} {
				if a, b := fast.sum(kind), slow.sum(kind); a != b {
					for id := range a {
						if a[id] != b[id] {
							t.Errorf("counter %s (block kind %d): inline path %d, general path %d", counters.ID(id), kind, a[id], b[id])
						}
					}
				}
			}
			if len(gotFast) == 0 {
				t.Fatal("nothing delivered: the case tests nothing")
			}
		})
	}
}

// runFrames offers frames in random batches (re-offering what a Pause
// left), drains queues in a random pattern from seed, and returns what the
// application received, one line per packet. With slow, every frame goes
// through the general path (nic.StepSlow).
func runFrames(t *testing.T, rg *rig, frames [][]byte, seed uint64, slow bool) []string {
	step := nic.Stepper(rg.eng, slow)
	r := rand.New(rand.NewPCG(seed, 5))
	var got []string
	drain := func(q int) {
		rg.pkts, _ = rg.cl.Queue(q).Recv(rg.pkts[:0])
		for _, p := range rg.pkts {
			got = append(got, fmt.Sprintf("q%d buf %d len %d flags %#x hash %#x stamp %d data %x", p.Queue, p.Buf, len(p.Data), p.Flags, p.Hash, p.Stamp, p.Data))
		}
		rg.cl.Queue(q).Release(rg.pkts)
	}
	for off := 0; off < len(frames); {
		n := min(len(frames)-off, 1+r.IntN(64))
		done := step(frames[off : off+n])
		off += done
		for q := 0; q < rg.cl.Queues(); q++ {
			if r.IntN(3) > 0 {
				drain(q)
			}
		}
		if done == 0 {
			for q := 0; q < rg.cl.Queues(); q++ {
				drain(q) // a paused batch: make room, as a real core would
			}
		}
	}
	step(nil)
	for q := 0; q < rg.cl.Queues(); q++ {
		drain(q)
		drain(q)
	}
	rg.eng.Fold()
	return got
}

// mixedFrames returns n frames of the kinds TestInlinePathAgrees names.
func mixedFrames(r *rand.Rand, n int) [][]byte {
	mac1, mac2 := [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
	var out [][]byte
	for len(out) < n {
		src := netip.AddrFrom4([4]byte{198, 18, byte(r.IntN(4)), byte(1 + r.IntN(200))})
		dst := netip.AddrFrom4([4]byte{198, 19, 0, byte(1 + r.IntN(8))})
		sport, dport := uint16(1024+r.IntN(4000)), uint16(9000+r.IntN(8))
		var f []byte
		switch k := r.IntN(20); {
		case k < 12: // the common frame, small to full size
			f = rss.BuildUDP4(nil, mac1, mac2, src, dst, sport, dport, []int{18, 22, 50, 200, 1472}[r.IntN(5)])
		case k < 14:
			s6 := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(r.IntN(200))})
			d6 := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: 1, 15: byte(r.IntN(8))})
			f = rss.BuildUDP6(nil, mac1, mac2, s6, d6, sport, dport, 40+r.IntN(100))
		case k < 15: // longer than a buffer: truncated
			f = rss.BuildUDP4(nil, mac1, mac2, src, dst, sport, dport, 2100+r.IntN(500))
		case k < 17: // cut short: malformed
			f = rss.BuildUDP4(nil, mac1, mac2, src, dst, sport, dport, 60)
			f = f[:r.IntN(len(f))]
		case k < 19: // a scribbled header byte
			f = rss.BuildUDP4(nil, mac1, mac2, src, dst, sport, dport, 30)
			f[r.IntN(42)] ^= byte(1 + r.IntN(255))
		default:
			f = []byte{}
		}
		out = append(out, bytes.Clone(f))
	}
	return out
}
