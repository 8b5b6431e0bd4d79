package client_test

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/vnic/vnic/alloc"
	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/shm"
)

// busyRig is a local tenant of one queue with a small allocator cache, the
// test playing vnicd: it has posted 64 packets, which the application
// received and holds.
type busyRig struct {
	t    *testing.T
	r    *shm.Region
	ten  *client.Tenant
	q    *client.Queue
	axn  *ax.NIC
	pkts []client.Packet
}

func newBusyRig(t *testing.T) *busyRig {
	t.Helper()
	g := shm.Queues(1, 64, 128, 8, 2048, 64+64)
	g.AllocCache = 4 // a cache of 4 (capacity 6) cannot take 64 frees
	r, err := shm.Create(g, shm.Options{Name: "client-busy-lock-test", NoHuge: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	ten, err := client.Local(r, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rg := &busyRig{t: t, r: r, ten: ten, q: ten.Queue(0)}
	if rg.axn, err = ax.NewNIC(r.AxMem(0), int(g.AxSize), g.BufCount); err != nil {
		t.Fatal(err)
	}
	bxn, err := bx.NewNIC(r.BxMem(0), int(g.BxSize))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 64; i++ {
		b, idx, ok, err := rg.axn.Take()
		if !ok || err != nil {
			t.Fatalf("Ax entry %d: %v %v", i, ok, err)
		}
		if ok, err := bxn.Stage(&bx.Entry{Buf: b, Len: 60, AxIdx: uint32(idx)}); !ok || err != nil {
			t.Fatalf("stage %d: %v", i, err)
		}
	}
	bxn.Flush()
	rg.axn.Publish()
	for tries := 0; len(rg.pkts) < 64 && tries < 10; tries++ {
		rg.pkts, _ = rg.q.Recv(rg.pkts)
	}
	if len(rg.pkts) != 64 || rg.q.Err() != nil {
		t.Fatalf("received %d of 64 packets: %v", len(rg.pkts), rg.q.Err())
	}
	return rg
}

// lock makes the pool lock held by a live process (this one, as another
// process of the tenant would), or frees it.
func (rg *busyRig) lock(held bool) {
	v := uint32(0)
	if held {
		v = uint32(os.Getpid())
	}
	binary.NativeEndian.PutUint32(rg.r.AllocMem()[alloc.LockOffset:], v)
}

// conserved reports the buffers in no place: not free in the allocator, not
// posted in the Ax ring, not held by the application (held).
func (rg *busyRig) missing(held int) int {
	posted, err := rg.axn.Avail(1 << 20)
	if err != nil {
		rg.t.Fatal(err)
	}
	return int(rg.r.Geo.BufCount) - rg.ten.Alloc.Available() - posted - held
}

// TestReleaseOnBusyLockLosesNothing: 64 buffers released while another
// process holds the pool lock are not lost: the queue keeps those whose
// free failed and frees them at its next operation; Err reports the busy
// lock, then clears once that operation succeeds.
func TestReleaseOnBusyLockLosesNothing(t *testing.T) {
	rg := newBusyRig(t)
	if n := rg.missing(64); n != 0 {
		t.Fatalf("setup: %d buffers in no place", n)
	}
	rg.lock(true)
	rg.q.Release(rg.pkts)
	if err := rg.q.Err(); !errors.Is(err, alloc.ErrLockBusy) {
		t.Fatalf("Err after a Release on a busy lock: %v", err)
	}
	rg.lock(false) // the holder lets go
	rg.q.Recv(nil)
	if err := rg.q.Err(); err != nil {
		t.Fatalf("Err after a Recv that succeeded: %v (stale)", err)
	}
	if n := rg.missing(0); n != 0 {
		t.Fatalf("%d of the 64 buffers released on a busy lock are lost", n)
	}
}

// TestReleaseReturnsAllocatorError: Release returns the busy lock's error,
// quickly, the queue keeps the buffers (the census finds each in exactly
// one place, the unfreed ones with the queue), and the next Recv frees
// them and returns nil.
func TestReleaseReturnsAllocatorError(t *testing.T) {
	rg := newBusyRig(t)
	rg.lock(true)
	start := time.Now()
	err := rg.q.Release(rg.pkts)
	el := time.Since(start)
	if !errors.Is(err, alloc.ErrLockBusy) || rg.q.Stashed() == 0 {
		t.Fatalf("Release on a busy lock: %v, %d buffers kept", err, rg.q.Stashed())
	}
	if el > time.Second {
		t.Fatalf("Release blocked %v on the busy lock", el)
	}
	kept := rg.q.Stashed()
	rg.lock(false)
	c, err := rg.ten.Census()
	if err != nil || c.Err() != nil {
		t.Fatalf("census with %d buffers kept: %v %v", kept, err, c.Err())
	}
	if c.Held[1] != kept {
		t.Fatalf("census counts %d kept buffers, the queue says %d", c.Held[1], kept)
	}
	if _, err := rg.q.Recv(nil); err != nil || rg.q.Stashed() != 0 || rg.q.Err() != nil {
		t.Fatalf("Recv after the holder let go: %v, %d kept, Err %v", err, rg.q.Stashed(), rg.q.Err())
	}
	if c, err = rg.ten.Census(); err != nil || c.Err() != nil || c.Held[1] != 0 {
		t.Fatalf("census after the retry: %v %v", err, c.Err())
	}
	t.Logf("Release on a busy lock returned after %v with %d buffers kept; census pool %d caches %v rings %d", el.Round(time.Millisecond), kept, c.Pool, c.Caches, c.Held[0])
}
