package fabric_test

import (
	"net/netip"
	"testing"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
)

// rig is an engine whose TX sink is a fabric, with hosts the test drives
// as the tenants would (client.Local over their regions), on a clock the
// test moves.
type rig struct {
	t     testing.TB
	eng   *nic.Engine
	fab   *fabric.Fabric
	now   uint64
	hosts []*rhost
	pkts  []client.Packet
	// foldEvery is the engine's Config.FoldEvery (benchmarks: Run's 16).
	foldEvery int
}

type rhost struct {
	addr   netip.Addr
	ten    *nic.Tenant
	cl     *client.Tenant
	region *shm.Region
}

func newRig(t testing.TB, cfg fabric.Config, policy nic.Policy) *rig {
	t.Helper()
	fab, err := fabric.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, fab: fab, pkts: make([]client.Packet, 0, 64)}
	if _, ok := t.(*testing.B); ok {
		r.foldEvery = 16 // as Run folds
	}
	eng, err := nic.New(nic.Config{Model: nic.RxBisect, Policy: policy, EmulatorCPU: -1, Tx: fab, Now: func() uint64 { return r.now }, FoldEvery: r.foldEvery})
	if err != nil {
		t.Fatal(err)
	}
	r.eng = eng
	return r
}

// addHost attaches a tenant with q queues as host addr (MAC macOf(addr)),
// claiming UDP (or only port, if not 0) there.
func (r *rig) addHost(addr string, queues int, port uint16, key rss.Key) *rhost {
	r.t.Helper()
	return r.addHostGeo(addr, shm.Queues(queues, 256, 1024, 256, shm.DefaultBufSize, queues*(256+256)+2*1024), port, key)
}

// addHostGeo is addHost with the region's geometry g.
func (r *rig) addHostGeo(addr string, g shm.Geometry, port uint16, key rss.Key) *rhost {
	r.t.Helper()
	a := netip.MustParseAddr(addr)
	g.Model = uint32(nic.RxBisect)
	region, err := shm.Create(g, shm.Options{NoHuge: true})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { region.Close() })
	m := nic.Match{Proto: rss.ProtoUDP, Dst: netip.PrefixFrom(a, 32), DstPortLo: port, DstPortHi: port}
	ten, err := r.eng.AddTenant(nic.TenantConfig{ID: len(r.hosts) + 1, Name: addr, Match: m, Key: key, MAC: macOf(a)}, region) // Join makes it a host
	if err != nil {
		r.t.Fatal(err)
	}
	cl, err := client.Local(region, client.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	h := &rhost{addr: a, ten: ten, cl: cl, region: region}
	r.hosts = append(r.hosts, h)
	return h
}

// macOf is the rig's MAC of the host at a: 02:00 and a's four bytes.
func macOf(a netip.Addr) [6]byte {
	b := a.As4()
	return [6]byte{2, 0, b[0], b[1], b[2], b[3]}
}

// frame is a UDP frame from host src to dst, between their MACs.
func frame(src, dst string, sport, dport uint16, payload int) []byte {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	return rss.BuildUDP4(nil, macOf(s), macOf(d), s, d, sport, dport, payload)
}

// send puts frames on h's TX ring 0 and lets the engine take them (one
// TxStep per 64 frames); it returns how many the ring took.
func (r *rig) send(h *rhost, frames [][]byte) int {
	r.t.Helper()
	sent := 0
	for sent < len(frames) {
		n, err := h.cl.Queue(0).Send(frames[sent:min(len(frames), sent+32)])
		if err != nil {
			r.t.Fatal(err)
		}
		sent += n
		for r.eng.TxStep() > 0 {
		}
		if n == 0 {
			break
		}
	}
	return sent
}

// drain takes every frame h's queues hold; verify sees each.
func (r *rig) drain(h *rhost, verify func(q int, p client.Packet)) int {
	got := 0
	for {
		r.eng.Step(nil)
		n := 0
		for q := 0; q < h.cl.Queues(); q++ {
			r.pkts, _ = h.cl.Queue(q).Recv(r.pkts[:0])
			for _, p := range r.pkts {
				if verify != nil {
					verify(q, p)
				}
			}
			h.cl.Queue(q).Release(r.pkts)
			n += len(r.pkts)
		}
		got += n
		if n == 0 {
			return got
		}
	}
}

// ledger returns host h's ledger.
func (r *rig) ledger(h *rhost) fabric.HostStats {
	for _, s := range r.fab.Hosts() {
		if s.Addr == h.addr {
			return s
		}
	}
	r.t.Fatalf("host %v has no ledger", h.addr)
	return fabric.HostStats{}
}

// balanced checks sent = delivered + every drop (+ delayed) over all hosts.
func (r *rig) balanced() {
	r.t.Helper()
	tot := r.fab.Totals()
	sum := tot[fabric.Delivered] + uint64(r.fab.Delayed())
	for _, d := range fabric.DropReasons() {
		sum += tot[d]
	}
	if sum != tot[fabric.Sent] {
		r.t.Fatalf("ledger: sent %d, delivered + drops + delayed %d: %v", tot[fabric.Sent], sum, tot)
	}
}
