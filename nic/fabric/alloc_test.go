package fabric_test

import (
	"testing"
	"time"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
)

// The per-frame path (the engine's TX pass, the copy out of the sender's
// buffer, the source check, the model with every limit on, the delay
// line, the receive path) allocates nothing.
func TestPerFrameAllocsNothing(t *testing.T) {
	for _, cfg := range []fabric.Config{
		{},
		{FlowBps: 1e12, FlowPps: 1e12, DPUs: 4, DPUPps: 1e12, NICBps: 1e15, Loss: 0.01, Seed: 3},
		{Delay: time.Microsecond, FlowPps: 1e12, Loss: 0.01},
	} {
		r := newRig(t, cfg, nic.Drop)
		a := r.addHost("198.18.0.1", 1, 0, nil)
		b := r.addHost("198.18.0.2", 2, 0, nil)
		frames := hostFrames(32)
		frames = append(frames, frame("198.18.0.1", "198.18.0.9", 1, 2, 18)) // no host
		frames = append(frames, frame("198.18.0.2", "198.18.0.1", 1, 2, 18)) // spoofed
		src := r.fab.Source()
		buf := make([][]byte, 0, 32)
		step := func() {
			a.cl.Queue(0).Send(frames)
			r.eng.TxStep()
			r.now += 10000
			buf, _ = src.Recv(buf[:0])
			if len(buf) > 0 {
				r.eng.Step(buf)
			}
			r.drain(b, nil)
		}
		step()
		if n := testing.AllocsPerRun(200, step); n != 0 {
			t.Fatalf("model %+v: %.1f allocations per pass", cfg, n)
		}
		if r.ledger(b).Get(fabric.Received) == 0 {
			t.Fatalf("model %+v: nothing delivered", cfg)
		}
		r.balanced()
	}
}
