package client_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/vnic/vnic/alloc"
	"github.com/vnic/vnic/shm"
)

// TestAllocatorErrorsReachCallers: once the tenant's allocator is corrupt,
// Send returns the error instead of (0, nil), Wait returns it instead of
// starving, and Err reports it.
func TestAllocatorErrorsReachCallers(t *testing.T) {
	g := shm.Queues(1, 8, 16, 8, 2048, 8+8)
	g.AllocCache = 2
	ten, r := localTenant(t, g)
	q := ten.Queue(0)
	if q.Err() != nil {
		t.Fatal(q.Err())
	}
	// Scribble the pool length past the buffer count.
	binary.LittleEndian.PutUint32(r.AllocMem()[alloc.PoolLenOffset:], 1<<30)
	frames := make([][]byte, 16)
	for i := range frames {
		frames[i] = make([]byte, 60)
	}
	var sendErr error
	for i := 0; i < 4 && sendErr == nil; i++ {
		_, sendErr = q.Send(frames)
	}
	if !errors.Is(sendErr, alloc.ErrCorrupt) {
		t.Fatalf("Send on a corrupt allocator: %v", sendErr)
	}
	if err := q.Wait(context.Background()); !errors.Is(err, alloc.ErrCorrupt) {
		t.Fatalf("Wait: %v", err)
	}
	t.Logf("Send, Wait and Err report: %v", q.Err())
}
