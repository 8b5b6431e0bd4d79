package fabric_test

import (
	"context"
	"testing"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
)

// Under Run, a pass that moved TX frames while the source had none (the
// fabric's loopback) is work, not idleness: the engine folds (and loads
// every receive ring's cursors for the gauges) every 16 such passes, not
// after each one. The source's Recv plays both hosts, on the engine's
// goroutine, so the test counts passes exactly.
func TestRunLoopbackDoesNotFoldEachPass(t *testing.T) {
	r := newRig(t, fabric.Config{}, nic.Drop)
	eng, err := nic.New(nic.Config{Model: nic.RxBisect, EmulatorCPU: -1, Idle: nic.IdleBusy, Tx: r.fab})
	if err != nil {
		t.Fatal(err)
	}
	r.eng = eng
	a := r.addHost("198.18.0.1", 1, 0, nil)
	b := r.addHost("198.18.0.2", 2, 0, nil)
	frames := hostFrames(32)
	const passes = 2000
	ctx, cancel := context.WithCancel(context.Background())
	looks, got := 0, 0
	src := r.fab.Source()
	hosts := nic.SourceFunc(func(dst [][]byte) ([][]byte, error) {
		if looks++; looks == passes {
			cancel()
		}
		a.cl.Queue(0).Send(frames)
		for q := 0; q < b.cl.Queues(); q++ {
			r.pkts, _ = b.cl.Queue(q).Recv(r.pkts[:0])
			got += len(r.pkts)
			b.cl.Queue(q).Release(r.pkts)
		}
		return src.Recv(dst)
	})
	_, bx0 := b.ten.CursorLoads()
	eng.Run(ctx, hosts)
	_, bx1 := b.ten.CursorLoads()
	if got < passes*32/2 {
		t.Fatalf("the receiver got %d frames in %d passes", got, passes)
	}
	// A fold per pass loads each of the receiver's 2 Bx cursors once per
	// pass (4000 in all); every 16 passes, about 250, plus as many room checks.
	loads := bx1 - bx0
	t.Logf("%d Bx cursor loads of the receiver in %d passes", loads, passes)
	if loads > passes/2 {
		t.Fatalf("%d cursor loads of the receiver in %d passes: the engine folded after each pass", loads, passes)
	}
}
