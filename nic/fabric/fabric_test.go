package fabric_test

import (
	"bytes"
	"testing"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
)

func TestDeliverHostToHost(t *testing.T) {
	r := newRig(t, fabric.Config{}, nic.Drop)
	a := r.addHost("198.18.0.1", 2, 0, nil)
	b := r.addHost("198.18.0.2", 4, 0, nil)
	var frames [][]byte
	for i := range 200 {
		frames = append(frames, frame("198.18.0.1", "198.18.0.2", uint16(1000+i), 9000, 18))
	}
	frames = append(frames, frame("198.18.0.1", "198.18.0.9", 1, 9000, 18)) // nobody's address
	if n := r.send(a, frames); n != len(frames) {
		t.Fatalf("sent %d of %d", n, len(frames))
	}
	queues := map[int]int{}
	got := r.drain(b, func(q int, p client.Packet) {
		queues[q]++
		sport := int(p.Data[34])<<8 | int(p.Data[35])
		if i := sport - 1000; i < 0 || i >= 200 || !bytes.Equal(p.Data, frames[i]) {
			t.Fatalf("received a frame that was not sent: % x", p.Data)
		}
	})
	if got != 200 {
		t.Fatalf("host b received %d frames, want 200", got)
	}
	if len(queues) < 2 {
		t.Fatalf("200 flows all reached one queue: %v (RSS did not spread them)", queues)
	}
	la, lb := r.ledger(a), r.ledger(b)
	if la.Get(fabric.Sent) != 201 || la.Get(fabric.Delivered) != 200 || la.Get(fabric.NoHost) != 1 || lb.Get(fabric.Received) != 200 {
		t.Fatalf("ledger a %v, b %v", la.Count, lb.Count)
	}
	if n := r.drain(a, nil); n != 0 {
		t.Fatalf("the sender received %d of its own frames", n)
	}
	r.balanced()
}
