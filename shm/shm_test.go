package shm_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/vnic/vnic/shm"
)

var geo = shm.Queues(4, 128, 1024, 256, 2048, 1024)

func formatted(t *testing.T, g shm.Geometry) []byte {
	t.Helper()
	mem := alignedBytes(int(g.Layout().Total))
	if _, err := shm.Format(mem, g, 0); err != nil {
		t.Fatal(err)
	}
	return mem
}

func TestFormatOpenRoundTrip(t *testing.T) {
	mem := formatted(t, geo)
	r, err := shm.Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	if r.Geo != geo {
		t.Fatalf("geometry %+v, want %+v", r.Geo, geo)
	}
	if _, ok := r.Buffer(geo.BufCount); ok {
		t.Fatal("buffer id == count accepted")
	}
	if b, ok := r.Buffer(geo.BufCount - 1); !ok || len(b) != int(geo.BufSize) || cap(b) != int(geo.BufSize) {
		t.Fatal("last buffer wrong")
	}
}

// TestSectionsDisjoint checks, over random geometries, that every ring,
// counter block and buffer lies inside the region and no two overlap.
func TestSectionsDisjoint(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		n := 1 + r.IntN(8)
		g := shm.Queues(n, 2<<r.IntN(9), 2<<r.IntN(11), 2<<r.IntN(9), 128<<r.IntN(5), 1+r.IntN(5000))
		if r.IntN(4) == 0 {
			g.NumTx, g.NumComp = 0, 0
		}
		mem := formatted(t, g)
		reg, err := shm.Open(mem)
		if err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
		type span struct {
			name   string
			lo, hi uint64
		}
		base := uintptr(unsafePointer(mem))
		var spans []span
		add := func(name string, b []byte) {
			lo := uint64(uintptr(unsafePointer(b)) - base)
			spans = append(spans, span{name, lo, lo + uint64(len(b))})
		}
		add("header", mem[:shm.HeaderSize])
		for q := 0; q < n; q++ {
			add(fmt.Sprint("ax", q), reg.AxMem(q))
			add(fmt.Sprint("bx", q), reg.BxMem(q))
			if g.NumTx > 0 {
				add(fmt.Sprint("tx", q), reg.TxMem(q))
				add(fmt.Sprint("comp", q), reg.CompMem(q))
			}
		}
		add("counters", mem[reg.Lay.Counters:reg.Lay.Counters+reg.Lay.CountersSize])
		add("wake", mem[reg.Lay.Wake:reg.Lay.Wake+reg.Lay.WakeBytes])
		// Every flag word sits inside the wake section, on a 128-byte line
		// of its own.
		lines := map[uint64]string{}
		flag := func(name string, p *uint32) {
			off := uint64(addrOf32(p) - base)
			if off < reg.Lay.Wake || off+4 > reg.Lay.Wake+reg.Lay.WakeBytes {
				t.Fatalf("%+v: %s at %d is outside the wake section", g, name, off)
			}
			if other, ok := lines[off/shm.WakeLine]; ok {
				t.Fatalf("%+v: %s shares a %d-byte line with %s", g, name, shm.WakeLine, other)
			}
			lines[off/shm.WakeLine] = name
		}
		flag("engine sleeping", reg.EngineSleeping())
		for q := 0; q < n; q++ {
			flag(fmt.Sprint("need-wakeup ", q), reg.NeedWakeup(q))
			flag(fmt.Sprint("signal ", q), reg.Signal(q))
		}
		first, _ := reg.Buffer(0)
		last, _ := reg.Buffer(g.BufCount - 1)
		spans = append(spans, span{"buffers", uint64(uintptr(unsafePointer(first)) - base), uint64(uintptr(unsafePointer(last))-base) + uint64(g.BufSize)})
		sort.Slice(spans, func(a, b int) bool { return spans[a].lo < spans[b].lo })
		for j, s := range spans {
			if s.hi > reg.Lay.Total {
				t.Fatalf("%+v: %s ends at %d past the region's %d bytes", g, s.name, s.hi, reg.Lay.Total)
			}
			if j > 0 && spans[j-1].hi > s.lo {
				t.Fatalf("%+v: %s overlaps %s", g, spans[j-1].name, s.name)
			}
		}
	}
}

func rewriteChecksum(mem []byte) {
	binary.LittleEndian.PutUint32(mem[shm.OffChecksum:], crc32.Checksum(mem[:shm.OffChecksum], crc32.MakeTable(crc32.Castagnoli)))
}

// TestBadHeader damages the header in every way a buggy or hostile writer
// could and checks that Open names the failed check.
func TestBadHeader(t *testing.T) {
	le := binary.LittleEndian
	cases := []struct {
		name   string
		damage func([]byte) []byte
		want   error
	}{
		{"magic", func(m []byte) []byte { m[0] ^= 0xff; return m }, shm.ErrMagic},
		{"version", func(m []byte) []byte { le.PutUint32(m[shm.OffVersion:], 99); return m }, shm.ErrVersion},
		{"version 1 (need-wakeup flags on the cursor lines)", func(m []byte) []byte { le.PutUint32(m[shm.OffVersion:], 1); return m }, shm.ErrVersion},
		{"wake section moved (checksum forged)", func(m []byte) []byte {
			le.PutUint64(m[shm.OffWakeOff:], 0)
			rewriteChecksum(m)
			return m
		}, shm.ErrGeometry},
		{"flipped geometry byte", func(m []byte) []byte { m[shm.OffBxSize] ^= 1; return m }, shm.ErrChecksum},
		{"ring size not a power of two (checksum forged)", func(m []byte) []byte {
			le.PutUint32(m[shm.OffAxSize:], 100)
			rewriteChecksum(m)
			return m
		}, shm.ErrGeometry},
		{"huge ring count (checksum forged)", func(m []byte) []byte {
			le.PutUint32(m[shm.OffNumBx:], 1<<30)
			rewriteChecksum(m)
			return m
		}, shm.ErrGeometry},
		{"buffer offset moved (checksum forged)", func(m []byte) []byte {
			le.PutUint64(m[shm.OffBufOff:], 1<<40)
			rewriteChecksum(m)
			return m
		}, shm.ErrGeometry},
		{"buffer count raised (checksum forged)", func(m []byte) []byte {
			le.PutUint32(m[shm.OffBufCount:], 1<<20)
			rewriteChecksum(m)
			return m
		}, shm.ErrGeometry},
		{"total size lies (checksum forged)", func(m []byte) []byte {
			le.PutUint64(m[shm.OffTotalSize:], 1<<20)
			rewriteChecksum(m)
			return m
		}, shm.ErrSize},
		{"truncated mapping", func(m []byte) []byte { return m[:len(m)/2] }, shm.ErrSize},
		{"shorter than a header", func(m []byte) []byte { return m[:100] }, shm.ErrSize},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := c.damage(formatted(t, geo))
			_, err := shm.Open(mem)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			t.Logf("reported: %v", err)
		})
	}
}

func TestBadGeometry(t *testing.T) {
	for _, g := range []shm.Geometry{
		{},
		shm.Queues(1, 100, 1024, 256, 2048, 10),
		shm.Queues(1, 128, 1024, 256, 100, 10),
		shm.Queues(1, 128, 1024, 256, 2048, 0),
		shm.Queues(300, 128, 1024, 256, 2048, 10),
	} {
		if err := g.Validate(); !errors.Is(err, shm.ErrGeometry) {
			t.Errorf("%+v: %v", g, err)
		}
	}
}

func ExampleOpen() {
	g := shm.Queues(2, 64, 256, 64, 2048, 256)
	mem := make([]byte, g.Layout().Total)
	shm.Format(mem, g, 0)
	mem[shm.OffMagic] = 0 // damage it
	_, err := shm.Open(mem)
	fmt.Println(errors.Is(err, shm.ErrMagic))
	// Output: true
}
