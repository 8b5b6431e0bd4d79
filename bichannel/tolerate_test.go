package bichannel

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport/lossytest"
)

// With TolerateDeadPeers, the death of one peer fails only what involves
// it: the others keep exchanging, Flush waits for them alone. A restarted
// node (same id, a new Endpoint) is not taken back: its Connect ends with
// its context, naming the nodes that did not connect, and the survivors'
// view of it stays dead.
func TestTolerateDeadPeers(t *testing.T) {
	cfg := testConfig()
	cfg.Workers = 1
	cfg.TolerateDeadPeers = true
	// testConfig's 10 s heartbeat timeout: node 2's death is seen through
	// its Close (goodbye, connection closed) well within the 3 s below; a
	// short timeout would let a scheduling stall mark a live peer dead.
	eps, _ := lossyCluster(t, 3, cfg, lossytest.Config{Loss: 0.05, Seed: 3})
	a, b, c := eps[0], eps[1], eps[2]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.Close()
	deadline := time.Now().Add(3 * time.Second)
	for !slices.Equal(a.DeadPeers(), []int{2}) {
		if time.Now().After(deadline) {
			t.Fatalf("node 0 never saw node 2 die: dead %v", a.DeadPeers())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := a.Send(2, 0, []byte("x")); !errors.Is(err, ErrPeerDown) {
		t.Fatalf("Send to the dead node: %v, want ErrPeerDown", err)
	}
	recvd := make(chan error, 1)
	go func() {
		var got int
		for got < 200 {
			msgs, err := b.RecvWait(ctx, 0, nil)
			if err != nil {
				recvd <- err
				return
			}
			got += len(msgs)
		}
		recvd <- nil
	}()
	for i := range 200 {
		if err := a.Send(1, 0, []byte{byte(i)}); err != nil {
			t.Fatalf("Send to a live node after another died: %v", err)
		}
	}
	if err := <-recvd; err != nil {
		t.Fatalf("RecvWait on a live node: %v", err)
	}
	if _, err := a.Recv(0, nil); err != nil {
		t.Errorf("Recv: %v, want no error", err)
	}
	if err := a.FlushContext(ctx); err != nil {
		t.Errorf("Flush: %v, want the live peer's acknowledgements only", err)
	}

	// Node 2 restarts: nobody takes it back.
	rc := cfg
	rc.NodeID = 2
	ln, err := lossytest.New(lossytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if rc.FastPath, err = ln.NewFastPath(1); err != nil {
		t.Fatal(err)
	}
	r, err := New(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer ccancel()
	err = r.Connect(cctx, []Peer{{ID: 0}, {ID: 1}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("restarted node's Connect: %v, want its context's deadline", err)
	}
	t.Logf("restarted node 2: %v", err)
	if !slices.Equal(a.DeadPeers(), []int{2}) {
		t.Errorf("node 0's dead peers %v, want [2]", a.DeadPeers())
	}
}
