package client_test

import (
	"testing"
	"unsafe"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/shm"
)

// TestLocalFillsEveryRing: with exactly queues*AxSize buffers, every Ax
// ring starts full whatever the allocator cache size.
func TestLocalFillsEveryRing(t *testing.T) {
	for _, cache := range []int{2, 16, 64, 256} {
		for _, model := range []uint32{client.ModelRxBisect, client.ModelPrivRing} {
			g := shm.Queues(8, 128, 256, 64, 2048, 8*128)
			g.AllocCache = uint32(cache)
			g.Model = model
			_, r := localTenant(t, g)
			for q := 0; q < 8; q++ {
				p, c, _ := ring.Cursors(r.AxMem(q))
				if p-c != 128 {
					t.Fatalf("cache %d model %d: Ax ring %d holds %d of 128", cache, model, q, p-c)
				}
			}
		}
	}
}

// localTenant formats a region of geometry g in ordinary memory and
// attaches an in-process tenant to it.
func localTenant(t *testing.T, g shm.Geometry) (*client.Tenant, *shm.Region) {
	t.Helper()
	words := make([]uint64, g.Layout().Total/8+1)
	r, err := shm.Format(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), g.Layout().Total), g, 0)
	if err != nil {
		t.Fatal(err)
	}
	ten, err := client.Local(r, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ten, r
}
