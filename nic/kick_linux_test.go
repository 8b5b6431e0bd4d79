package nic_test

import (
	"net/netip"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
)

// TestKickNapBit plays the need-wakeup rule deterministically, without
// timing: a queue whose word holds a generation with nic.NapBit (it naps on
// a timer) is signalled only once its Ax ring has fewer than
// AxSize/UrgentFraction entries left, once per generation, and counted as
// Urgent; a sleeping queue (no bit) is signalled on the first post of its
// generation; a polling one (0) never.
func TestKickNapBit(t *testing.T) {
	const axSize = 16
	k := newKickRig(t, axSize, 64, 128, nic.Config{Model: nic.RxBisect, EmulatorCPU: -1})
	eng, word, post, signals := k.eng, k.word, k.post, k.signals
	low := axSize / nic.UrgentFraction

	atomic.StoreUint32(word, 7|nic.NapBit)
	post(axSize - low) // exactly low left: not yet low
	if n := signals(); n != 0 {
		t.Fatalf("napping queue signalled %d times with %d of %d Ax entries left", n, low, axSize)
	}
	post(1) // below low
	if n := signals(); n != 1 {
		t.Fatalf("napping queue with %d Ax entries left: %d signals, want 1", low-1, n)
	}
	post(1)
	if n := signals(); n != 0 {
		t.Fatalf("the same nap generation was signalled again (%d)", n)
	}
	if st := eng.IdleStats(); st.Urgent != 1 || st.Signals != 1 {
		t.Errorf("idle stats %+v: want 1 urgent signal", st)
	}
	atomic.StoreUint32(word, 8) // asleep on its socket
	post(1)
	if n := signals(); n != 1 {
		t.Fatalf("sleeping queue: %d signals on the first post, want 1", n)
	}
	atomic.StoreUint32(word, 0) // polling
	post(1)
	if n := signals(); n != 0 {
		t.Fatalf("polling queue signalled %d times", n)
	}
	if st := eng.IdleStats(); st.Urgent != 1 || st.Signals != 2 {
		t.Errorf("idle stats %+v: want 2 signals, 1 urgent", st)
	}
}

// TestHeldKicks: while Run takes the burst that arrived during a nap
// (HoldKicks), a sleeping queue is not signalled per batch but once when the
// burst ends (ReleaseKicks), even if a fold in the middle of the burst
// (FoldEvery) dropped the tenant from the engine's dirty list; a napping
// queue whose Ax ring runs low is still signalled at once; and outside a
// burst every post signals as before.
func TestHeldKicks(t *testing.T) {
	const axSize = 64
	k := newKickRig(t, axSize, 256, 512, nic.Config{Model: nic.RxBisect, EmulatorCPU: -1, Batch: 4, FoldEvery: 2})
	eng, word, batch, signals, cl := k.eng, k.word, k.post, k.signals, k.cl
	drain := func() int {
		pk, _ := cl.Queue(0).Recv(nil)
		cl.Queue(0).Release(pk)
		return len(pk)
	}

	atomic.StoreUint32(word, 3) // asleep on its socket
	nic.HoldKicks(eng)
	for i := 0; i < 5; i++ { // full batches, folds among them
		batch(4)
	}
	eng.Step(nil) // an empty look folds too
	if n := signals(); n != 0 {
		t.Fatalf("%d signals during a held burst, want 0", n)
	}
	nic.ReleaseKicks(eng)
	if n := signals(); n != 1 {
		t.Fatalf("%d signals when the burst ended, want 1", n)
	}
	if got := drain(); got != 20 {
		t.Fatalf("the queue holds %d frames after the burst, want 20", got)
	}
	nic.ReleaseKicks(eng)
	if n := signals(); n != 0 {
		t.Fatalf("a second release signalled %d times", n)
	}

	// A napping queue that runs low is signalled during a held burst.
	atomic.StoreUint32(word, 4|nic.NapBit)
	nic.HoldKicks(eng)
	for i := 0; i < axSize/4-2; i++ {
		batch(4) // leaves 8 of 64 Ax entries: below AxSize/UrgentFraction
	}
	if n := signals(); n != 1 {
		t.Fatalf("a napping queue with its Ax ring low: %d signals during a held burst, want 1", n)
	}
	nic.ReleaseKicks(eng)
	if n := signals(); n != 0 {
		t.Fatalf("the urgent signal was sent again at release (%d)", n)
	}
	drain()

	// Outside a burst, the first post of a sleep signals at once.
	atomic.StoreUint32(word, 5)
	batch(1)
	if n := signals(); n != 1 {
		t.Fatalf("%d signals for a post outside a burst, want 1", n)
	}
}

// kickRig is an engine with one single-queue tenant whose queue has a
// doorbell and a signal word, its client (the Ax ring filled), the queue's
// need-wakeup word, post (Step over n copies of one frame) and signals (how
// many signals the engine sent since the last call).
type kickRig struct {
	eng     *nic.Engine
	cl      *client.Tenant
	bell    int     // the queue's doorbell eventfd (the tenant's copy is the same file)
	signal  *uint32 // the queue's signal word
	word    *uint32
	post    func(n int)
	signals func() int
}

func newKickRig(t testing.TB, axSize, bxSize, bufs int, cfg nic.Config) kickRig {
	t.Helper()
	g := shm.Queues(1, axSize, bxSize, 8, 2048, bufs)
	region, err := shm.Format(alignedBytes(int(g.Layout().Total)), g, 0)
	if err != nil {
		t.Fatal(err)
	}
	bell, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(bell) })
	eng, err := nic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ten, err := eng.AddTenant(nic.TenantConfig{ID: 1, Name: "sleeper", Match: nic.Match{Default: true}, Wake: []int{bell}}, region)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.RemoveTenant(ten) })       // stops its signaller
	cl, err := client.Local(region, client.Options{}) // fills the Ax ring
	if err != nil {
		t.Fatal(err)
	}
	frame := rss.BuildUDP4(nil, [6]byte{2}, [6]byte{2, 1}, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.19.0.1"), 1000, 2000, 18)
	var last uint64
	return kickRig{eng: eng, cl: cl, bell: bell, signal: region.Signal(0), word: region.NeedWakeup(0),
		post: func(n int) {
			fs := make([][]byte, n)
			for i := range fs {
				fs[i] = frame
			}
			if got := eng.Step(fs); got != n {
				t.Fatalf("Step took %d of %d frames", got, n)
			}
		},
		signals: func() int {
			n := eng.IdleStats().Signals
			d := int(n - last)
			last = n
			return d
		}}
}

// testFrame is the UDP frame the kick rigs post.
func testFrame() []byte {
	return rss.BuildUDP4(nil, [6]byte{2}, [6]byte{2, 1}, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.19.0.1"), 1000, 2000, 18)
}
