package nic_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
)

// hostTenant attaches a tenant of 4 queues claiming dst (a /32) to eng.
func hostTenant(t *testing.T, eng *nic.Engine, id int, dst string, key rss.Key) (*nic.Tenant, *client.Tenant) {
	t.Helper()
	g := shm.Queues(4, 256, 1024, 64, shm.DefaultBufSize, 4*256+2048)
	g.Model = uint32(nic.RxBisect)
	region, err := shm.Create(g, shm.Options{NoHuge: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { region.Close() })
	ten, err := eng.AddTenant(nic.TenantConfig{ID: id, Name: dst, Match: nic.Match{Dst: netip.MustParsePrefix(dst + "/32")}, Key: key}, region)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.Local(region, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ten, cl
}

// A tenant with its own RSS key has its frames hashed with that key, on
// the inline path and on the general one; a tenant without one keeps the
// engine's. Key reports the key in use.
func TestTenantOwnKey(t *testing.T) {
	own := append(rss.Key(nil), rss.MicrosoftKey...)
	for i := range own {
		own[i] ^= byte(i*37 + 1)
	}
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slow=%v", slow), func(t *testing.T) {
			eng, err := nic.New(nic.Config{Model: nic.RxBisect, EmulatorCPU: -1})
			if err != nil {
				t.Fatal(err)
			}
			step := nic.Stepper(eng, slow)
			plainT, plain := hostTenant(t, eng, 1, "198.18.0.1", nil)
			ownT, mine := hostTenant(t, eng, 2, "198.18.0.2", own)
			if string(plainT.Key()) != string(rss.MicrosoftKey) || string(ownT.Key()) != string(own) {
				t.Fatalf("Key: %x and %x", plainT.Key(), ownT.Key())
			}
			for _, c := range []struct {
				ten *nic.Tenant
				cl  *client.Tenant
				dst string
				key rss.Key
			}{{plainT, plain, "198.18.0.1", rss.MicrosoftKey}, {ownT, mine, "198.18.0.2", own}} {
				h, _ := rss.NewHasher(c.key)
				var frames [][]byte
				for i := range 256 {
					frames = append(frames, rss.BuildUDP4(nil, [6]byte{2}, [6]byte{2, 1}, netip.MustParseAddr("198.18.0.9"), netip.MustParseAddr(c.dst), uint16(1000+i), 9000, 18))
				}
				// Twice: the second batch takes the inline path (the
				// tenant was seen since the last fold) unless slow.
				for range 2 {
					for i := 0; i < len(frames); i += 32 {
						step(frames[i : i+32])
					}
					step(nil)
					got := 0
					pk := make([]client.Packet, 0, 64)
					for q := 0; q < 4; q++ {
						for {
							pk, _ = c.cl.Queue(q).Recv(pk[:0])
							if len(pk) == 0 {
								break
							}
							for _, p := range pk {
								var tu rss.Tuple
								if err := rss.Parse(p.Data, &tu); err != nil {
									t.Fatal(err)
								}
								hash := h.HashTuple(&tu)
								if p.Hash != hash || int(p.Queue) != c.ten.RETA().Queue(hash) || q != int(p.Queue) {
									t.Fatalf("%s: frame hashed %#x to queue %d (polled %d); its key gives %#x, queue %d", c.dst, p.Hash, p.Queue, q, hash, c.ten.RETA().Queue(hash))
								}
							}
							got += len(pk)
							c.cl.Queue(q).Release(pk)
						}
					}
					if got != len(frames) {
						t.Fatalf("%s received %d of %d frames", c.dst, got, len(frames))
					}
				}
			}
		})
	}
}

// fromSink records, for each frame, the tenant that sent it.
type fromSink struct {
	from  []*nic.Tenant
	first []byte
}

func (s *fromSink) Send(frames [][]byte) (int, error) { panic("SendFrom must be called instead") }

func (s *fromSink) SendFrom(frames [][]byte, from []*nic.Tenant) (int, error) {
	if len(from) != len(frames) {
		panic("from and frames differ in length")
	}
	for i, f := range frames {
		s.from = append(s.from, from[i])
		s.first = append(s.first, f[0])
	}
	return len(frames), nil
}

// A TenantTxSink learns the sender of every frame of a pass that gathers
// several tenants' rings.
func TestTenantTxSinkNamesSenders(t *testing.T) {
	sink := &fromSink{}
	eng, err := nic.New(nic.Config{Model: nic.RxBisect, EmulatorCPU: -1, Tx: sink})
	if err != nil {
		t.Fatal(err)
	}
	ta, ca := hostTenant(t, eng, 1, "198.18.0.1", nil)
	tb, cb := hostTenant(t, eng, 2, "198.18.0.2", nil)
	for _, c := range []struct {
		cl  *client.Tenant
		tag byte
	}{{ca, 'a'}, {cb, 'b'}} {
		for q := 0; q < 2; q++ {
			if n, _ := c.cl.Queue(q).Send([][]byte{{c.tag, 1}, {c.tag, 2}, {c.tag, 3}}); n != 3 {
				t.Fatalf("sent %d", n)
			}
		}
	}
	if n := eng.TxStep(); n != 12 {
		t.Fatalf("TxStep took %d descriptors, want 12 in one pass", n)
	}
	if len(sink.from) != 12 {
		t.Fatalf("the sink saw %d frames", len(sink.from))
	}
	for i, ten := range sink.from {
		want := map[byte]*nic.Tenant{'a': ta, 'b': tb}[sink.first[i]]
		if ten != want {
			t.Fatalf("frame %d (%c) named tenant %v", i, sink.first[i], ten.Name)
		}
	}
}
