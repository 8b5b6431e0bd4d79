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
	g := shm.Queues(1, axSize, 64, 8, 2048, 128)
	region, err := shm.Format(alignedBytes(int(g.Layout().Total)), g, 0)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	eng, err := nic.New(nic.Config{Model: nic.RxBisect, EmulatorCPU: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.AddTenant(nic.TenantConfig{ID: 1, Name: "napper", Match: nic.Match{Default: true}, Wake: []int{pair[0]}}, region); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Local(region, client.Options{}); err != nil { // fills the Ax ring
		t.Fatal(err)
	}
	word := region.NeedWakeup(0)
	frame := rss.BuildUDP4(nil, [6]byte{2}, [6]byte{2, 1}, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.19.0.1"), 1000, 2000, 18)
	post := func(n int) {
		fs := make([][]byte, n)
		for i := range fs {
			fs[i] = frame
		}
		if got := eng.Step(fs); got != n {
			t.Fatalf("Step took %d of %d frames", got, n)
		}
	}
	signals := func() int {
		var b [64]byte
		k, _, _ := unix.Recvfrom(pair[1], b[:], unix.MSG_DONTWAIT)
		return max(k, 0)
	}
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
