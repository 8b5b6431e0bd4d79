package nic_test

import (
	"net/netip"
	"testing"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/shm"
)

// tallySink counts, per pass (Send call), the frames of each tenant.
type tallySink struct {
	pass map[*nic.Tenant]int
}

func (s *tallySink) Send(frames [][]byte) (int, error) { panic("SendFrom must be called instead") }

func (s *tallySink) SendFrom(frames [][]byte, from []*nic.Tenant) (int, error) {
	for _, t := range from {
		s.pass[t]++
	}
	return len(frames), nil
}

// txTenant attaches a tenant with q queues (TX rings of 64 entries) to
// eng, claiming dst.
func txTenant(t *testing.T, eng *nic.Engine, id, q int, dst string) (*nic.Tenant, *client.Tenant) {
	t.Helper()
	g := shm.Queues(q, 16, 64, 64, 256, q*(16+64)+256)
	g.Model = uint32(nic.RxBisect)
	region, err := shm.Create(g, shm.Options{NoHuge: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { region.Close() })
	ten, err := eng.AddTenant(nic.TenantConfig{ID: id, Name: dst, Match: nic.Match{Dst: netip.MustParsePrefix(dst + "/32")}}, region)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.Local(region, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ten, cl
}

// TestTxSharedPerTenant: the wire is shared per tenant, whatever its
// queue count. A tenant with 64 queues, all full, against two tenants of
// one queue each: while all three are backlogged each gets a third of the
// frames (to one turn) and none waits more than one pass; when the two
// offer less than their share (16 frames a pass each), every frame they
// offer leaves in the pass it was offered, as if the flood were not there.
func TestTxSharedPerTenant(t *testing.T) {
	sink := &tallySink{pass: map[*nic.Tenant]int{}}
	eng, err := nic.New(nic.Config{Model: nic.RxBisect, EmulatorCPU: -1, Tx: sink})
	if err != nil {
		t.Fatal(err)
	}
	flood, fc := txTenant(t, eng, 1, 64, "198.18.0.1")
	a, ac := txTenant(t, eng, 2, 1, "198.18.0.2")
	b, bc := txTenant(t, eng, 3, 1, "198.18.0.3")
	frame := make([]byte, 64)
	burst := make([][]byte, 32)
	for i := range burst {
		burst[i] = frame
	}
	// fill offers n frames on every TX ring of cl (a ring keeps what it
	// has room for: a backlogged ring stays full).
	fill := func(cl *client.Tenant, n int) int {
		sent := 0
		for q := 0; q < cl.Queues(); q++ {
			k, err := cl.Queue(q).Send(burst[:n])
			if err != nil {
				t.Fatal(err)
			}
			sent += k
		}
		return sent
	}
	const passes = 300
	total := map[*nic.Tenant]int{}
	starved := map[*nic.Tenant]int{}
	for p := 0; p < passes; p++ {
		for _, cl := range []*client.Tenant{fc, ac, bc} {
			fill(cl, 32)
		}
		clear(sink.pass)
		if n := eng.TxStep(); n != 64 {
			t.Fatalf("pass %d took %d descriptors, want a full batch of 64", p, n)
		}
		for _, ten := range []*nic.Tenant{flood, a, b} {
			total[ten] += sink.pass[ten]
			if sink.pass[ten] > 32 {
				t.Fatalf("pass %d: tenant %s took %d frames, more than one turn (32)", p, ten.Name, sink.pass[ten])
			}
			if sink.pass[ten] == 0 {
				if starved[ten]++; starved[ten] > 1 {
					t.Fatalf("pass %d: backlogged tenant %s got nothing for 2 passes in a row", p, ten.Name)
				}
			} else {
				starved[ten] = 0
			}
		}
	}
	for _, ten := range []*nic.Tenant{flood, a, b} {
		if d := total[ten] - passes*64/3; d < -32 || d > 32 {
			t.Fatalf("all backlogged: tenant %s took %d of %d frames, want a third (%d) to one turn: %v", ten.Name, total[ten], passes*64, passes*64/3, total)
		}
	}
	// a and b stop offering until their rings are empty; the flood goes on.
	for {
		fill(fc, 32)
		clear(sink.pass)
		eng.TxStep()
		if sink.pass[a]+sink.pass[b] == 0 {
			break
		}
	}
	for p := 0; p < passes; p++ {
		fill(fc, 32)
		for _, cl := range []*client.Tenant{ac, bc} {
			if n := fill(cl, 16); n != 16 {
				t.Fatalf("pass %d: the TX ring took %d of 16 frames", p, n)
			}
		}
		clear(sink.pass)
		eng.TxStep()
		if sink.pass[a] != 16 || sink.pass[b] != 16 || sink.pass[flood] != 32 {
			t.Fatalf("pass %d with 16 frames offered by each of two tenants: they got %d and %d, the 64-queue flood %d; want 16, 16 and the rest (32)", p, sink.pass[a], sink.pass[b], sink.pass[flood])
		}
	}
}
