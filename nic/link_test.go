package nic_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
)

// loopLink is a Link that sends every frame to the tenant route names
// (by sender), whatever the frame's header says, and records what the
// engine told it.
type loopLink struct {
	rx     nic.Rx
	binds  int
	joined []string
	left   []string
	refuse string // Join refuses the tenant of this name
	route  map[*nic.Tenant]*nic.Tenant
	to     []*nic.Tenant
	took   []int // what each SendFrom's Deliver took
}

func (l *loopLink) Bind(rx nic.Rx) { l.rx, l.binds = rx, l.binds+1 }

func (l *loopLink) Join(t *nic.Tenant) error {
	if t.Name == l.refuse {
		return errors.New("link: refused")
	}
	l.joined = append(l.joined, t.Name)
	return nil
}

func (l *loopLink) Leave(t *nic.Tenant) { l.left = append(l.left, t.Name) }

func (l *loopLink) Send(frames [][]byte) (int, error) { return len(frames), nil }

func (l *loopLink) SendFrom(frames [][]byte, from []*nic.Tenant) (int, error) {
	l.to = l.to[:0]
	for _, t := range from {
		l.to = append(l.to, l.route[t])
	}
	n := l.rx.Deliver(frames, l.to)
	l.took = append(l.took, n)
	clear(l.to)
	return n, nil
}

func linkRegion(t *testing.T, queues int) *shm.Region {
	t.Helper()
	g := shm.Queues(queues, 64, 256, 64, 2048, queues*64+512)
	reg, err := shm.Format(alignedBytes(int(g.Layout().Total)), g, 0)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestLinkBindJoinLeave: the engine binds its Link once, in New, and
// tells it of every tenant it adds and removes; a Join error refuses the
// tenant.
func TestLinkBindJoinLeave(t *testing.T) {
	l := &loopLink{refuse: "c"}
	eng, err := nic.New(nic.Config{EmulatorCPU: -1, Tx: l, Now: func() uint64 { return 42 }})
	if err != nil {
		t.Fatal(err)
	}
	if l.binds != 1 || l.rx == nil || l.rx.Now() != 42 {
		t.Fatalf("New bound the link %d times (or not to the engine's clock)", l.binds)
	}
	a, err := eng.AddTenant(nic.TenantConfig{Name: "a", Match: nic.Match{DstPortLo: 1, DstPortHi: 1}}, linkRegion(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.AddTenant(nic.TenantConfig{Name: "c", Match: nic.Match{DstPortLo: 2, DstPortHi: 2}}, linkRegion(t, 1)); err == nil || err.Error() != "link: refused" {
		t.Fatalf("a tenant the link refused: %v", err)
	}
	if _, err := eng.AddTenant(nic.TenantConfig{Name: "e"}, linkRegion(t, 1)); err == nil {
		t.Fatal("a tenant with an empty rule attached")
	}
	if len(eng.Tenants()) != 1 || !slices.Equal(l.joined, []string{"a"}) {
		t.Fatalf("tenants %d, joined %v: want a alone", len(eng.Tenants()), l.joined)
	}
	eng.RemoveTenant(a)
	eng.RemoveTenant(a) // twice: the link hears of it once
	if !slices.Equal(l.left, []string{"a"}) {
		t.Fatalf("left %v, want [a]", l.left)
	}
}

// TestLinkDeliver: frames a Link hands to Rx.Deliver reach the tenant it
// names, not the one the engine's match rules would pick, hashed with
// that tenant's key through its RETA and counted as received; a frame
// for a tenant that left is dropped as drops_no_tenant; a transmitted
// frame is delivered from SendFrom before its buffer is completed.
func TestLinkDeliver(t *testing.T) {
	l := &loopLink{route: map[*nic.Tenant]*nic.Tenant{}}
	eng, err := nic.New(nic.Config{EmulatorCPU: -1, Tx: l, FoldEvery: 1})
	if err != nil {
		t.Fatal(err)
	}
	ra, rb := linkRegion(t, 1), linkRegion(t, 4)
	a, err := eng.AddTenant(nic.TenantConfig{Name: "a", Match: nic.Match{DstPortLo: 9000, DstPortHi: 9000}}, ra)
	if err != nil {
		t.Fatal(err)
	}
	own := slices.Clone(eng.Config().Key)
	own[0] ^= 0xff
	b, err := eng.AddTenant(nic.TenantConfig{Name: "b", Match: nic.Match{DstPortLo: 9001, DstPortHi: 9001}, Key: own}, rb)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := client.Local(rb, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Port 9000 is a's by the rules; the link sends it to b.
	f := udpFrame(t, 9000)
	h, err := rss.NewHasher(own)
	if err != nil {
		t.Fatal(err)
	}
	var tup rss.Tuple
	if err := rss.Parse(f, &tup); err != nil {
		t.Fatal(err)
	}
	hash := h.HashTuple(&tup)
	if n := l.rx.Deliver([][]byte{f, f, f}, []*nic.Tenant{b, b, b}); n != 3 {
		t.Fatalf("Deliver took %d of 3", n)
	}
	eng.Step(nil)
	got := 0
	var pk []client.Packet
	for q := 0; q < cb.Queues(); q++ {
		pk, _ = cb.Queue(q).Recv(pk[:0])
		for _, p := range pk {
			if p.Hash != hash || b.RETA().Queue(hash) != q {
				t.Fatalf("frame on queue %d with hash %#x; b's key and RETA give %#x, queue %d", q, p.Hash, hash, b.RETA().Queue(hash))
			}
		}
		got += len(pk)
		cb.Queue(q).Release(pk)
	}
	if got != 3 || ra.Counters(shm.NICBlock, 0).Load(counters.Packets) != 0 {
		t.Fatalf("b got %d of 3 frames; a got %d", got, ra.Counters(shm.NICBlock, 0).Load(counters.Packets))
	}

	// a transmits; the link routes its frames to b from SendFrom.
	l.route[a] = b
	ca, err := client.Local(ra, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ca.Queue(0).Send([][]byte{f, f}); n != 2 || err != nil {
		t.Fatalf("a's Send: %d, %v", n, err)
	}
	if n := eng.TxStep(); n != 2 || !slices.Equal(l.took, []int{2}) {
		t.Fatalf("TxStep took %d, the link delivered %v", n, l.took)
	}
	eng.Fold()
	var sum uint64
	for q := 0; q < 4; q++ {
		sum += rb.Counters(shm.NICBlock, q).Load(counters.Packets)
	}
	if sum != 5 || ra.Counters(shm.NICBlock, 0).Load(counters.TxPackets) != 2 {
		t.Fatalf("b received %d frames, want 5; a sent %d, want 2", sum, ra.Counters(shm.NICBlock, 0).Load(counters.TxPackets))
	}

	// A tenant that left: dropped, not placed.
	eng.RemoveTenant(b)
	before := eng.Global().Load(counters.DropNoTenant)
	if n := l.rx.Deliver([][]byte{f, f}, []*nic.Tenant{b, nil}); n != 2 {
		t.Fatalf("Deliver to a tenant that left took %d of 2", n)
	}
	eng.Fold()
	if d := eng.Global().Load(counters.DropNoTenant) - before; d != 2 {
		t.Fatalf("frames for a tenant that left and for none: drops_no_tenant %d, want 2", d)
	}
}

// TestLinkDeliverZeroAllocs: the loop through a Link allocates nothing.
func TestLinkDeliverZeroAllocs(t *testing.T) {
	l := &loopLink{}
	eng, err := nic.New(nic.Config{EmulatorCPU: -1, Tx: l})
	if err != nil {
		t.Fatal(err)
	}
	reg := linkRegion(t, 2)
	b, err := eng.AddTenant(nic.TenantConfig{Name: "b", Match: nic.Match{DstPortLo: 9000, DstPortHi: 9000}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.Local(reg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	frames, to := make([][]byte, 32), make([]*nic.Tenant, 32)
	for i := range frames {
		frames[i], to[i] = udpFrame(t, 9000), b
	}
	pk := make([]client.Packet, 0, 64)
	if n := testing.AllocsPerRun(200, func() {
		l.rx.Deliver(frames, to)
		eng.Step(nil)
		for q := 0; q < cl.Queues(); q++ {
			pk, _ = cl.Queue(q).Recv(pk[:0])
			cl.Queue(q).Release(pk)
		}
	}); n != 0 {
		t.Fatalf("%v allocs per batch", n)
	}
}
