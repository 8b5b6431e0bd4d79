package ring_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/vnic/vnic/ring"
)

var nearWrap = ^uint64(0) - 4999 // cursors start 5000 entries below 2^64

type genEntry struct{ Seq uint64 }

func newMem(t testing.TB, capacity, entrySize int) []byte {
	t.Helper()
	// 8-byte aligned: backing arrays of []uint64 are.
	words := make([]uint64, (ring.Size(capacity, entrySize)+7)/8)
	return unsafeBytes(words)
}

// pump runs a producer and a consumer goroutine moving n sequence numbers
// through the ring with random batch sizes and checks order.
func pumpPlain(t *testing.T, mem []byte, capacity int, n uint64, seed uint64) {
	p, err := ring.NewProducer[uint64](mem, capacity)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ring.NewConsumer[uint64](mem, capacity)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		producePlain(p, n, seed, func(err error) { t.Error(err) })
	}()
	if err := consumePlain(c, n, seed); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// producePlain commits n consecutive numbers in batches of random sizes
// (seeded): consumePlain with the same seed checks them.
func producePlain(p *ring.Producer[uint64], n, seed uint64, fail func(error)) {
	r := rand.New(rand.NewPCG(seed, 1))
	for next := uint64(0); next < n; {
		k, err := p.Reserve(1 + r.IntN(64))
		if err != nil {
			fail(err)
			return
		}
		k = int(min(uint64(k), n-next))
		for i := 0; i < k; i++ {
			*p.Slot(i) = next + uint64(i)
		}
		p.Commit(k)
		next += uint64(k)
		if k == 0 {
			runtime.Gosched()
		}
	}
}

func consumePlain(c *ring.Consumer[uint64], n, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 2))
	for want := uint64(0); want < n; {
		k, err := c.Peek(1 + r.IntN(64))
		if err != nil {
			return err
		}
		for i := 0; i < k; i++ {
			if got := *c.Slot(i); got != want {
				return fmt.Errorf("entry %d: got %d", want, got)
			}
			want++
		}
		c.Release(k)
		if k == 0 {
			runtime.Gosched()
		}
	}
	return nil
}

func pumpGen(t *testing.T, mem []byte, capacity int, n uint64, seed uint64) {
	p, err := ring.NewGenProducer[genEntry](mem, capacity)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ring.NewGenConsumer[genEntry](mem, capacity)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		produceGen(p, n, seed, func(err error) { t.Error(err) })
	}()
	if err := consumeGen(c, n, seed); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

func produceGen(p *ring.GenProducer[genEntry], n, seed uint64, fail func(error)) {
	r := rand.New(rand.NewPCG(seed, 1))
	for next := uint64(0); next < n; {
		k, err := p.Reserve(1 + r.IntN(64))
		if err != nil {
			fail(err)
			return
		}
		k = int(min(uint64(k), n-next))
		for i := 0; i < k; i++ {
			p.Slot(i).Seq = next + uint64(i)
		}
		p.Commit(k)
		next += uint64(k)
		if k == 0 {
			runtime.Gosched()
		}
	}
}

func consumeGen(c *ring.GenConsumer[genEntry], n, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 2))
	for want := uint64(0); want < n; {
		k := c.Peek(1 + r.IntN(64))
		for i := 0; i < k; i++ {
			if got := c.Slot(i).Seq; got != want {
				return fmt.Errorf("entry %d: got %d", want, got)
			}
			want++
		}
		c.Release(k)
		if k == 0 {
			runtime.Gosched()
		}
	}
	return nil
}

func TestPlainWrapsBelow2to64(t *testing.T) {
	for _, capacity := range []int{2, 8, 1024} {
		mem := newMem(t, capacity, 8)
		if err := ring.Init[uint64](mem, capacity, nearWrap); err != nil {
			t.Fatal(err)
		}
		pumpPlain(t, mem, capacity, 200_000, uint64(capacity))
		prod, cons, _ := ring.Cursors(mem)
		if prod != cons || prod != nearWrap+200_000 {
			t.Fatalf("cap %d: cursors %d/%d after wrap, want both %d", capacity, prod, cons, nearWrap+200_000)
		}
	}
}

func TestGenWrapsBelow2to64(t *testing.T) {
	for _, capacity := range []int{2, 8, 1024} {
		mem := newMem(t, capacity, ring.GenEntrySize[genEntry]())
		if err := ring.InitGen[genEntry](mem, capacity, nearWrap); err != nil {
			t.Fatal(err)
		}
		pumpGen(t, mem, capacity, 200_000, uint64(capacity))
	}
}

// TestGenZeroMemoryIsEmpty checks that a ring over zeroed memory starting at
// cursor 0 reports nothing ready, without InitGen.
func TestGenZeroMemoryIsEmpty(t *testing.T) {
	mem := newMem(t, 16, ring.GenEntrySize[genEntry]())
	c, err := ring.NewGenConsumer[genEntry](mem, 16)
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Peek(16); n != 0 {
		t.Fatalf("zeroed ring shows %d ready entries", n)
	}
}

func TestFullAndEmpty(t *testing.T) {
	mem := newMem(t, 4, 8)
	p, _ := ring.NewProducer[uint64](mem, 4)
	c, _ := ring.NewConsumer[uint64](mem, 4)
	if n, _ := c.Peek(4); n != 0 {
		t.Fatalf("empty ring peeks %d", n)
	}
	n, _ := p.Reserve(10)
	if n != 4 {
		t.Fatalf("reserve on empty ring of 4 gave %d", n)
	}
	p.Commit(4)
	if n, _ := p.Reserve(1); n != 0 {
		t.Fatalf("full ring reserves %d", n)
	}
	if n, _ := c.Peek(10); n != 4 {
		t.Fatalf("full ring peeks %d", n)
	}
	c.Release(1)
	if n, _ := p.Reserve(4); n != 1 {
		t.Fatalf("after one release, reserve gave %d, want 1", n)
	}
}

func TestBadGeometry(t *testing.T) {
	mem := newMem(t, 8, 8)
	for _, capa := range []int{0, 1, 3, 12, ring.MaxCapacity * 2} {
		if _, err := ring.NewProducer[uint64](mem, capa); !errors.Is(err, ring.ErrGeometry) {
			t.Errorf("capacity %d: err %v, want ErrGeometry", capa, err)
		}
	}
	if _, err := ring.NewConsumer[uint64](mem[:100], 8); !errors.Is(err, ring.ErrGeometry) {
		t.Errorf("short memory: err %v, want ErrGeometry", err)
	}
	if _, err := ring.NewConsumer[uint64](mem[1:], 4); !errors.Is(err, ring.ErrGeometry) {
		t.Errorf("misaligned memory: err %v, want ErrGeometry", err)
	}
	if _, err := ring.NewConsumer[*int](mem, 8); !errors.Is(err, ring.ErrGeometry) {
		t.Errorf("pointer entries: err %v, want ErrGeometry", err)
	}
}

// TestBadCursors writes garbage into the shared cursors, as a hostile peer
// would, and checks that each side reports it and never reads out of bounds.
func TestBadCursors(t *testing.T) {
	const capa = 8
	type attack struct {
		name  string
		setup func(p *ring.Producer[uint64], c *ring.Consumer[uint64], mem []byte)
		check func(p *ring.Producer[uint64], c *ring.Consumer[uint64]) error
	}
	for _, a := range []attack{
		{"consumer backwards", func(p *ring.Producer[uint64], c *ring.Consumer[uint64], mem []byte) {
			p.Commit(capa)
			c.Release(4)
			p.Reserve(capa)
			putCursor(mem, ring.ConsOffset, nearWrap-1)
		}, func(p *ring.Producer[uint64], _ *ring.Consumer[uint64]) error { _, err := p.Reserve(capa); return err }},
		{"consumer beyond producer", func(p *ring.Producer[uint64], _ *ring.Consumer[uint64], mem []byte) {
			p.Commit(capa)
			putCursor(mem, ring.ConsOffset, nearWrap+capa+1)
		}, func(p *ring.Producer[uint64], _ *ring.Consumer[uint64]) error { _, err := p.Reserve(1); return err }},
		{"producer backwards", func(p *ring.Producer[uint64], c *ring.Consumer[uint64], mem []byte) {
			p.Commit(3)
			c.Peek(3)
			putCursor(mem, ring.ProdOffset, nearWrap+1)
		}, func(_ *ring.Producer[uint64], c *ring.Consumer[uint64]) error { _, err := c.Peek(capa); return err }},
		{"producer beyond capacity", func(_ *ring.Producer[uint64], _ *ring.Consumer[uint64], mem []byte) {
			putCursor(mem, ring.ProdOffset, nearWrap+capa+1)
		}, func(_ *ring.Producer[uint64], c *ring.Consumer[uint64]) error { _, err := c.Peek(1); return err }},
		{"producer far ahead", func(_ *ring.Producer[uint64], _ *ring.Consumer[uint64], mem []byte) {
			putCursor(mem, ring.ProdOffset, 1<<40)
		}, func(_ *ring.Producer[uint64], c *ring.Consumer[uint64]) error { _, err := c.Peek(1); return err }},
	} {
		t.Run(a.name, func(t *testing.T) {
			mem := newMem(t, capa, 8)
			ring.Init[uint64](mem, capa, nearWrap)
			p, _ := ring.NewProducer[uint64](mem, capa)
			c, _ := ring.NewConsumer[uint64](mem, capa)
			a.setup(p, c, mem)
			err := a.check(p, c)
			if !errors.Is(err, ring.ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			t.Logf("reported: %v", err)
			// Sticky: the next call reports it again instead of using the cursor.
			if err2 := a.check(p, c); !errors.Is(err2, ring.ErrCorrupt) {
				t.Fatalf("error not sticky: %v", err2)
			}
		})
	}
}

func TestBadGenConsumerCursor(t *testing.T) {
	const capa = 8
	for _, bad := range []uint64{nearWrap - 1, nearWrap + 6, 0, 1 << 63} {
		mem := newMem(t, capa, ring.GenEntrySize[genEntry]())
		ring.InitGen[genEntry](mem, capa, nearWrap)
		p, err := ring.NewGenProducer[genEntry](mem, capa)
		if err != nil {
			t.Fatal(err)
		}
		p.Commit(5)
		if n, err := p.Refresh(); err != nil || n != 5 {
			t.Fatalf("honest ring: occupancy %d, err %v", n, err)
		}
		putCursor(mem, ring.ConsOffset, bad)
		_, err = p.Refresh()
		if !errors.Is(err, ring.ErrCorrupt) {
			t.Fatalf("consumer cursor %d: got %v, want ErrCorrupt", bad, err)
		}
		if _, err := p.Reserve(1); !errors.Is(err, ring.ErrCorrupt) {
			t.Fatalf("error not sticky: %v", err)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	mem := newMem(t, 64, 8)
	p, _ := ring.NewProducer[uint64](mem, 64)
	c, _ := ring.NewConsumer[uint64](mem, 64)
	if a := testing.AllocsPerRun(1000, func() {
		n, _ := p.Reserve(32)
		for i := 0; i < n; i++ {
			*p.Slot(i) = uint64(i)
		}
		p.Commit(n)
		m, _ := c.Peek(32)
		for i := 0; i < m; i++ {
			_ = *c.Slot(i)
		}
		c.Release(m)
	}); a != 0 {
		t.Fatalf("plain ring: %v allocs per batch", a)
	}
	gmem := newMem(t, 64, ring.GenEntrySize[genEntry]())
	gp, _ := ring.NewGenProducer[genEntry](gmem, 64)
	gc, _ := ring.NewGenConsumer[genEntry](gmem, 64)
	if a := testing.AllocsPerRun(1000, func() {
		n, _ := gp.Reserve(32)
		for i := 0; i < n; i++ {
			gp.Slot(i).Seq = uint64(i)
		}
		gp.Commit(n)
		m := gc.Peek(32)
		for i := 0; i < m; i++ {
			_ = gc.Slot(i).Seq
		}
		gc.Release(m)
	}); a != 0 {
		t.Fatalf("generation ring: %v allocs per batch", a)
	}
}

// TestCursorLoads checks that each side counts its loads of the other's
// cursor, and only those: a request the cached copy covers loads nothing.
func TestCursorLoads(t *testing.T) {
	mem := newMem(t, 8, 8)
	p, _ := ring.NewProducer[uint64](mem, 8)
	c, _ := ring.NewConsumer[uint64](mem, 8)
	p0, c0 := p.Loads(), c.Loads()
	p.Reserve(8) // attach saw an empty ring: 8 free are known
	if p.Loads() != p0 {
		t.Fatalf("a reserve within the known room loaded the cursor (%d loads)", p.Loads()-p0)
	}
	p.Commit(8)
	c.Peek(4) // nothing known: one load
	c.Peek(8) // the 8 are known now
	if got := c.Loads() - c0; got != 1 {
		t.Fatalf("consumer loaded the producer cursor %d times, want 1", got)
	}
	c.Release(8)
	p.Reserve(1) // full as last seen: one load finds the 8 released
	p.Reserve(8)
	if got := p.Loads() - p0; got != 1 {
		t.Fatalf("producer loaded the consumer cursor %d times, want 1", got)
	}
}
