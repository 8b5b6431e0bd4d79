package bx_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/ring"
)

func newRing(t testing.TB, capacity int, start uint64) []byte {
	words := make([]uint64, (bx.Size(capacity)+7)/8)
	mem := unsafeBytes(words)
	if err := bx.Init(mem, capacity, start); err != nil {
		t.Fatal(err)
	}
	return mem
}

func TestSlotSize(t *testing.T) {
	if bx.SlotSize != 32 {
		t.Fatalf("Bx slot is %d bytes, the documented layout is 32", bx.SlotSize)
	}
}

func TestStageFlushPoll(t *testing.T) {
	mem := newRing(t, 4, ^uint64(0)-5)
	nic, _ := bx.NewNIC(mem, 4)
	core, _ := bx.NewCore(mem, 4)
	var got []bx.Entry
	for lap := 0; lap < 10; lap++ {
		for i := 0; i < 4; i++ {
			ok, err := nic.Stage(&bx.Entry{Buf: uint32(lap*4 + i), Len: 60, AxIdx: uint32(i)})
			if !ok || err != nil {
				t.Fatalf("lap %d: stage %d: %v %v", lap, i, ok, err)
			}
		}
		if ok, _ := nic.Stage(&bx.Entry{}); ok {
			t.Fatal("staged into a full ring")
		}
		if n := len(core.Poll(got[:0], 4)); n != 0 {
			t.Fatalf("core saw %d entries before Flush", n)
		}
		nic.Flush()
		got = core.Poll(got[:0], 8)
		if len(got) != 4 {
			t.Fatalf("lap %d: polled %d", lap, len(got))
		}
		for i, e := range got {
			if e.Buf != uint32(lap*4+i) {
				t.Fatalf("lap %d: entry %d buf %d", lap, i, e.Buf)
			}
		}
		if occ, _ := nic.Refresh(); occ != 4 {
			t.Fatalf("occupancy before release %d", occ)
		}
		core.Release()
		if occ, _ := nic.Refresh(); occ != 0 {
			t.Fatalf("occupancy after release %d", occ)
		}
	}
}

func TestBadConsumerCursor(t *testing.T) {
	mem := newRing(t, 4, 0)
	nic, _ := bx.NewNIC(mem, 4)
	nic.Stage(&bx.Entry{})
	nic.Flush()
	// A hostile core releases 100 entries of a ring that holds 1.
	c, _ := ring.NewGenConsumer[bx.Entry](mem, 4)
	c.Advance(0)
	putCons(mem, 100)
	if _, err := nic.Refresh(); !errors.Is(err, ring.ErrCorrupt) {
		t.Fatalf("got %v", err)
	}
	if ok, err := nic.Stage(&bx.Entry{}); ok || !errors.Is(err, ring.ErrCorrupt) {
		t.Fatalf("stage after corruption: %v %v", ok, err)
	}
}

func TestZeroAllocs(t *testing.T) {
	mem := newRing(t, 64, 0)
	nic, _ := bx.NewNIC(mem, 64)
	core, _ := bx.NewCore(mem, 64)
	dst := make([]bx.Entry, 0, 32)
	e := bx.Entry{Len: 64}
	if a := testing.AllocsPerRun(1000, func() {
		for i := 0; i < 32; i++ {
			nic.Stage(&e)
		}
		nic.Flush()
		dst = core.Poll(dst[:0], 32)
		core.Release()
	}); a != 0 {
		t.Fatalf("%v allocs", a)
	}
}

func ExampleNIC() {
	mem := make([]byte, bx.Size(8))
	bx.Init(mem, 8, 0)
	nic, _ := bx.NewNIC(mem, 8)
	core, _ := bx.NewCore(mem, 8)
	nic.Stage(&bx.Entry{Buf: 7, Len: 64, AxRing: 2, AxIdx: 0})
	nic.Stage(&bx.Entry{Buf: bx.NoBuf, Flags: bx.FlagNotice, AxRing: 1, AxIdx: 5})
	nic.Flush()
	for _, e := range core.Poll(nil, 8) {
		fmt.Println(e.Buf == bx.NoBuf, e.AxRing, e.AxIdx)
	}
	core.Release()
	// Output:
	// false 2 0
	// true 1 5
}
