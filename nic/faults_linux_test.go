package nic_test

import (
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
)

// TestPunchingNeighbourCost measures the engine's cost per frame of a good
// tenant's traffic mixed with a neighbour's (half the frames each), on
// memfd regions as vnicd makes them: quiet, while the neighbour punches
// holes in its buffer section, and once the neighbour is isolated (as
// vnicd does on detection); all three in the same run, as ratios. The
// engine thread's page faults show where the cost comes from: punching
// costs one per neighbour frame, isolation none.
func TestPunchingNeighbourCost(t *testing.T) {
	eng, err := nic.New(nic.Config{EmulatorCPU: -1})
	if err != nil {
		t.Fatal(err)
	}
	type side struct {
		region *shm.Region
		ten    *nic.Tenant
		cl     *client.Tenant
	}
	var good, bad side
	for i, s := range []*side{&good, &bad} {
		g := shm.Queues(1, 256, 512, 64, shm.DefaultBufSize, 1024)
		r, err := shm.Create(g, shm.Options{Name: "punch-cost", NoHuge: true})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		port := uint16(5000 + 1000*i)
		ten, err := eng.AddTenant(nic.TenantConfig{ID: i + 1, Name: "t", Match: nic.Match{Proto: rss.ProtoUDP, DstPortLo: port, DstPortHi: port}}, r)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := client.Local(r, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		*s = side{r, ten, cl}
	}
	frames := make([][]byte, 32)
	for i := range frames {
		frames[i] = rss.BuildUDP4(nil, [6]byte{2}, [6]byte{2, 1}, netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}),
			netip.MustParseAddr("198.19.0.1"), uint16(10000+i), uint16(5000+1000*(i%2)), 18)
	}
	pk := make([]client.Packet, 0, 64)
	drain := func(cl *client.Tenant) {
		pk, _ = cl.Queue(0).Recv(pk[:0])
		cl.Queue(0).Release(pk)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	faults := func() uint64 {
		var ru unix.Rusage
		unix.Getrusage(unix.RUSAGE_THREAD, &ru)
		return uint64(ru.Minflt)
	}
	// phase runs batches for d and returns ns per frame and faults per
	// frame.
	phase := func(d time.Duration) (ns, fpf float64) {
		f0, t0, n := faults(), time.Now(), 0
		for time.Since(t0) < d {
			for i := 0; i < 16; i++ {
				n += eng.Step(frames)
				eng.Step(nil)
				drain(good.cl)
				drain(bad.cl)
			}
		}
		el := time.Since(t0)
		return float64(el.Nanoseconds()) / float64(n), float64(faults()-f0) / float64(n)
	}
	phase(100 * time.Millisecond) // warm up
	quietNs, quietF := phase(300 * time.Millisecond)
	var stop atomic.Bool
	var punches atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		off, n := int64(bad.region.Lay.Buf), int64(bad.region.Lay.BufBytes)
		for !stop.Load() {
			unix.Fallocate(bad.region.FD(), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
			punches.Add(1)
			time.Sleep(100 * time.Microsecond)
		}
	}()
	time.Sleep(5 * time.Millisecond)
	punchNs, punchF := phase(300 * time.Millisecond)
	_, hole, _ := bad.region.Hole()
	eng.Isolate(bad.ten, errIsolated)
	isoNs, isoF := phase(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	_, goodHole, _ := good.region.Hole()
	t.Logf("ns per frame (half the good tenant's, half the neighbour's): quiet %.0f (%.3f faults/frame); neighbour punching %.0f (%.3f faults/frame, %d punches): %.2fx; neighbour isolated, still punching %.0f (%.3f faults/frame): %.2fx",
		quietNs, quietF, punchNs, punchF, punches.Load(), punchNs/quietNs, isoNs, isoF, isoNs/quietNs)
	if !hole || goodHole {
		t.Fatalf("holes: neighbour %v, good tenant %v; want the neighbour's only", hole, goodHole)
	}
	if punchF < 0.001 || punchF < 10*quietF {
		t.Fatalf("the punching neighbour cost the engine %.3f faults per frame; the measurement does not reproduce the attack", punchF)
	}
	if isoF > punchF/10 {
		t.Fatalf("isolated, the neighbour still costs %.3f faults per frame (%.3f before)", isoF, punchF)
	}
}

var errIsolated = errTest("isolated by the test")

type errTest string

func (e errTest) Error() string { return string(e) }
