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

// TestStageBeyondBuffer stages batches larger than the NIC's own staging
// memory (so part of each batch is written to the ring before Flush), with
// the consumer polling in between, and checks that nothing is visible
// before Flush and that every entry arrives once, in order, with its Seq.
// Every third entry is written in place with Fill instead of Stage.
func TestStageBeyondBuffer(t *testing.T) {
	const capa = 256
	mem := newRing(t, capa, ^uint64(0)-100)
	nic, _ := bx.NewNIC(mem, capa)
	core, _ := bx.NewCore(mem, capa)
	var got []bx.Entry
	next, seq := uint32(0), uint32(0)
	for _, batch := range []int{1, 31, 32, 33, 64, 65, 100, 200, 256, 7} {
		for i := 0; i < batch; i++ {
			if i%3 == 1 { // Fill, in place, mixed with Stage
				if ok, err := nic.Room(1); !ok || err != nil {
					t.Fatalf("batch %d: room for %d: %v %v", batch, i, ok, err)
				}
				e := nic.Fill()
				e.Buf, e.Len = next+uint32(i), 60
			} else if ok, err := nic.Stage(&bx.Entry{Buf: next + uint32(i), Len: 60}); !ok || err != nil {
				t.Fatalf("batch %d: stage %d: %v %v", batch, i, ok, err)
			}
			if i%16 == 0 {
				if n := len(core.Poll(got[:0], capa)); n != 0 {
					t.Fatalf("batch %d: core saw %d entries before Flush", batch, n)
				}
			}
		}
		if n := nic.Flush(); n != batch {
			t.Fatalf("Flush posted %d of %d", n, batch)
		}
		got = core.Poll(got[:0], capa)
		if len(got) != batch {
			t.Fatalf("batch %d: polled %d", batch, len(got))
		}
		for i, e := range got {
			if e.Buf != next+uint32(i) || e.Seq != seq+uint32(i) || e.Len != 60 {
				t.Fatalf("batch %d: entry %d is %+v, want buf %d seq %d", batch, i, e, next+uint32(i), seq+uint32(i))
			}
		}
		core.Release()
		next += uint32(batch)
		seq += uint32(batch)
	}
}

// TestStageConcurrent runs the NIC and the core side on two goroutines
// (batches of 1 to 80 entries, so both the staging memory and its spill to
// the ring are used) and checks that the core sees every entry once, in
// order. Under -race it also checks the publication (Put, then one release
// store per batch) against the core's acquire loads.
func TestStageConcurrent(t *testing.T) {
	const capa, total = 128, 40000
	mem := newRing(t, capa, ^uint64(0)-1000)
	nic, _ := bx.NewNIC(mem, capa)
	core, _ := bx.NewCore(mem, capa)
	done := make(chan error, 1)
	go func() {
		var got []bx.Entry
		want := uint32(0)
		for spins := 0; want < total; spins++ {
			if spins > 1<<30 {
				done <- fmt.Errorf("core stuck at entry %d", want)
				return
			}
			got = core.Poll(got[:0], 64)
			for _, e := range got {
				if e.Buf != want || e.Seq != want {
					done <- fmt.Errorf("entry %+v, want buf and seq %d", e, want)
					return
				}
				want++
			}
			core.Release()
		}
		done <- nil
	}()
	next := uint32(0)
	for batch := 1; next < total; batch = batch%80 + 1 {
		for i := 0; i < batch && next < total; {
			ok, err := nic.Stage(&bx.Entry{Buf: next})
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				nic.Flush() // full: post what we have and wait for room
				continue
			}
			next++
			i++
		}
		nic.Flush()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
