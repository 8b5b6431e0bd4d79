package fabric_test

import (
	"testing"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
	"github.com/vnic/vnic/shm"
)

// pairRun runs a pair of hosts, a and b, each offering 16 frames per
// engine pass to the other for passes passes, beside (with flood) a host
// of 64 queues that keeps every TX ring full towards a fourth host. It
// returns the frames the pair delivered, and checks each pass's share
// from the ledgers: no host sends more than one turn (32 frames) in a
// pass.
func pairRun(t *testing.T, flood bool, passes int) uint64 {
	r := newRig(t, fabric.Config{}, nic.Drop)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	b := r.addHost("198.18.0.2", 1, 0, nil)
	var m *rhost
	var fm [][]byte
	if flood {
		m = r.addHostGeo("198.18.0.3", shm.Queues(64, 16, 64, 64, 256, 64*(16+64)+256), 0, nil)
		r.addHost("198.18.0.4", 1, 0, nil)
		for i := range 32 {
			fm = append(fm, frame("198.18.0.3", "198.18.0.4", uint16(i), 9000, 22))
		}
	}
	var fa, fb [][]byte
	for i := range 16 {
		fa = append(fa, frame("198.18.0.1", "198.18.0.2", uint16(i), 9000, 22))
		fb = append(fb, frame("198.18.0.2", "198.18.0.1", uint16(i), 9000, 22))
	}
	hosts := r.hosts
	last := make([]uint64, len(hosts))
	for p := 0; p < passes; p++ {
		if m != nil {
			for q := 0; q < m.cl.Queues(); q++ {
				if _, err := m.cl.Queue(q).Send(fm); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, c := range []struct {
			h  *rhost
			fs [][]byte
		}{{a, fa}, {b, fb}} {
			if _, err := c.h.cl.Queue(0).Send(c.fs); err != nil {
				t.Fatal(err)
			}
		}
		r.now += 6400
		r.eng.TxStep()
		for i, h := range hosts {
			s := r.ledger(h).Get(fabric.Sent)
			if s-last[i] > 32 {
				t.Fatalf("pass %d: host %v sent %d frames, more than one turn (32)", p, h.addr, s-last[i])
			}
			last[i] = s
		}
		r.drain(a, nil)
		r.drain(b, nil)
	}
	r.balanced()
	return r.ledger(a).Get(fabric.Delivered) + r.ledger(b).Get(fabric.Delivered)
}

// TX is shared per host, not per ring: a pair of hosts exchanging 16
// frames per pass each keeps its rate (at least 0.8 of it, here all of it)
// beside a host that floods a fourth from 64 queues.
func TestTxFairPerHost(t *testing.T) {
	const passes = 300
	alone := pairRun(t, false, passes)
	if alone != 2*16*passes {
		t.Fatalf("the pair alone delivered %d frames, want %d", alone, 2*16*passes)
	}
	beside := pairRun(t, true, passes)
	if beside*10 < alone*8 {
		t.Fatalf("beside a 64-queue flood the pair delivered %d frames, %.2f of its %d alone (want at least 0.8)", beside, float64(beside)/float64(alone), alone)
	}
	t.Logf("the pair delivered %d frames alone, %d beside a 64-queue flood (%.2f)", alone, beside, float64(beside)/float64(alone))
}
