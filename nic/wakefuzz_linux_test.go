package nic

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
)

// FuzzWakeChannel plays a hostile tenant against the wake-up channel as
// vnicd reads it: each 6-byte op of the input stores a value into the
// queue's need-wakeup word, the engine-sleeping word or the signal word,
// writes a value to the doorbell eventfd (its counter up to the ceiling),
// makes the doorbell blocking, posts frames, lets the engine sleep and
// wake, or receives and releases what was posted. Whatever the tenant wrote, no engine step and no sleep may take
// long (the engine never blocks on the tenant), no signal may be refused,
// and at most one signal goes out per generation the tenant published.
func FuzzWakeChannel(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 0, 0, 4, 0, 3, 0, 0, 0, 5, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0, 3, 0xfe, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0x80, 0, 5, 0, 0, 0, 0, 0})
	f.Add([]byte{6, 0, 0, 0, 0, 0, 3, 1, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 4, 2, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 7, 0, 0, 0, 5, 3, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 5, 7, 0, 0, 0, 0, 6, 1, 0, 0, 0, 0})
	frame := rss.BuildUDP4(nil, [6]byte{2}, [6]byte{2, 1}, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.19.0.1"), 1000, 2000, 18)
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 6*64 {
			ops = ops[:6*64]
		}
		g := shm.Queues(1, 16, 64, 8, 2048, 64)
		words := make([]uint64, g.Layout().Total/8+1)
		region, err := shm.Format(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), g.Layout().Total), g, 0)
		if err != nil {
			t.Fatal(err)
		}
		bell, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(bell)
		e, err := New(Config{Model: RxBisect, EmulatorCPU: -1})
		if err != nil {
			t.Fatal(err)
		}
		ten, err := e.AddTenant(TenantConfig{ID: 1, Name: "fuzz", Match: Match{Default: true}, Wake: []int{bell}}, region)
		if err != nil {
			t.Fatal(err)
		}
		defer e.RemoveTenant(ten) // stops its signaller
		d, err := newIdler(SourceFunc(func(dst [][]byte) ([][]byte, error) { return dst, nil }))
		if err != nil {
			t.Fatal(err)
		}
		defer d.close()
		d.addTenant(ten)
		cl, err := client.Local(region, client.Options{}) // fills the Ax ring
		if err != nil {
			t.Fatal(err)
		}
		pk := make([]client.Packet, 0, 64)
		need, eng, sig := region.NeedWakeup(0), region.EngineSleeping(), region.Signal(0)
		gens, last := 0, uint32(0) // new sleep generations published: stores of a new non-zero value
		blocking := false
		slow := func(what string, d time.Duration) {
			if d > 200*time.Millisecond {
				t.Fatalf("%s took %v: the engine waited on something the tenant controls", what, d)
			}
		}
		for len(ops) >= 6 {
			op, v := ops[0]%8, binary.LittleEndian.Uint32(ops[2:6])
			n := int(ops[1]%8) + 1
			ops = ops[6:]
			switch op {
			case 0:
				atomic.StoreUint32(need, v)
				if v != 0 && v != last {
					gens++
				}
				last = v
			case 1:
				atomic.StoreUint32(eng, v)
			case 2:
				atomic.StoreUint32(sig, v)
			case 3:
				var b [8]byte
				binary.LittleEndian.PutUint64(b[:], uint64(v)<<32|uint64(v))
				// The tenant's own write: non-blocking for the fuzzer's
				// sake (a blocking write at the ceiling would stop the
				// fuzzer, not vnicd), then the flag as the tenant left it.
				unix.SetNonblock(bell, true)
				unix.Write(bell, b[:]) // may fail at the ceiling: the tenant's problem
				unix.SetNonblock(bell, !blocking)
			case 4:
				blocking = v&1 == 0
				unix.SetNonblock(bell, !blocking)
			case 5:
				fs := make([][]byte, n)
				for i := range fs {
					fs[i] = frame
				}
				t0 := time.Now()
				e.Step(fs)
				slow("Step", time.Since(t0))
			case 6:
				e.setSleeping(1)
				t0 := time.Now()
				d.wait(time.Duration(n)*100*time.Microsecond, &e.idleCnt)
				slow("a sleep", time.Since(t0))
				e.setSleeping(0)
			case 7:
				pk, _ = cl.Queue(0).Recv(pk[:0])
				cl.Queue(0).Release(pk)
			}
		}
		is := e.IdleStats()
		if is.Refused != 0 {
			t.Fatalf("%d signals refused: %+v", is.Refused, is)
		}
		if int(is.Signals) > gens {
			t.Fatalf("%d signals for %d generations the tenant published: more than one per sleep", is.Signals, gens)
		}
	})
}
