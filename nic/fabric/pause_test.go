package fabric_test

import (
	"testing"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
)

// Under Policy Pause a receiver out of buffers holds the sender's frames
// on its TX ring (back-pressure, not loss): the ledger counts only what
// the fabric took, and once the receiver refills every frame arrives,
// each counted once.
func TestPauseHoldsFramesOnTheTXRing(t *testing.T) {
	r := newRig(t, fabric.Config{}, nic.Pause)
	a := r.addHost("198.18.0.1", 1, 0, nil)
	b := r.addHost("198.18.0.2", 1, 0, nil) // one queue: 256 Ax buffers
	var frames [][]byte
	for i := range 400 {
		frames = append(frames, frame("198.18.0.1", "198.18.0.2", uint16(1000+i), 9000, 18))
	}
	frames = append(frames, frame("198.18.0.1", "198.18.0.7", 1, 9000, 18)) // no host: decided once
	posted := 0
	for posted < len(frames) {
		n, err := a.cl.Queue(0).Send(frames[posted:min(posted+32, len(frames))])
		if err != nil {
			t.Fatal(err)
		}
		posted += n
		r.eng.TxStep()
	}
	for range 10 {
		r.eng.TxStep()
	}
	l := r.ledger(a)
	if l.Get(fabric.Sent) >= uint64(len(frames)) || l.Get(fabric.Delivered) > 256 {
		t.Fatalf("a starved receiver took %d of %d frames (ledger %v): the fabric should have stopped at its 256 buffers", l.Get(fabric.Sent), len(frames), l.Count)
	}
	r.balanced()
	got := 0
	for i := 0; i < 100 && got < 400; i++ {
		got += r.drain(b, nil)
		r.eng.TxStep()
	}
	got += r.drain(b, nil)
	l = r.ledger(a)
	if got != 400 || l.Get(fabric.Sent) != uint64(len(frames)) || l.Get(fabric.Delivered) != 400 || l.Get(fabric.NoHost) != 1 {
		t.Fatalf("received %d of 400; ledger %v", got, l.Count)
	}
	r.balanced()
}
