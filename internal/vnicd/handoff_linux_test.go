package vnicd

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
	"github.com/vnic/vnic/xsk"
)

// fakeSock is a manual-fill AF_XDP socket with a fake kernel behind it:
// wire writes a frame where the kernel would (the headroom after the
// oldest fill address) and returns it as an unaligned-mode RX descriptor.
type fakeSock struct {
	q, fd  int
	mem    []byte // the UMEM
	fill   []uint64
	rx     []xsk.Desc
	frames uint64
	closed bool
}

func (f *fakeSock) FillFree() int { return handoffRing - len(f.fill) }
func (f *fakeSock) Fill(a []uint64) int {
	n := min(len(a), f.FillFree())
	f.fill = append(f.fill, a[:n]...)
	return n
}
func (f *fakeSock) RecvDescs(dst []xsk.Desc) ([]xsk.Desc, error) {
	n := min(cap(dst)-len(dst), len(f.rx))
	dst = append(dst, f.rx[:n]...)
	f.rx = f.rx[n:]
	return dst, nil
}
func (f *fakeSock) FD() int                   { return f.fd }
func (f *fakeSock) Mode() xsk.BindMode        { return xsk.BindCopy }
func (f *fakeSock) Stats() (xsk.Stats, error) { return xsk.Stats{RxFrames: f.frames}, nil }
func (f *fakeSock) Close() error              { f.closed = true; return nil }

// wire delivers one frame; false when no fill address is posted.
func (f *fakeSock) wire(frame []byte) bool {
	if len(f.fill) == 0 {
		return false
	}
	a := f.fill[0]
	f.fill = f.fill[1:]
	copy(f.mem[a+xsk.Headroom:], frame)
	f.rx = append(f.rx, xsk.Desc{Addr: a | xsk.Headroom<<48, Len: uint32(len(frame))})
	f.frames++
	return true
}

// handoffRig is a hand-off wire over fake sockets, with an engine and a
// tenant whose region the sockets are laid over.
type handoffRig struct {
	w       *handoffWire
	hooks   *claimHooks
	eng     *nic.Engine
	ten     *nic.Tenant
	cl      *client.Tenant
	socks   []*fakeSock
	reg     map[int]int // queue -> registered fd
	claims  []bpf.Config
	failReg int // queue whose registration fails (-1: none)
}

func newHandoffRig(t *testing.T, queues int) *handoffRig {
	t.Helper()
	eng, err := nic.New(nic.Config{EmulatorCPU: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := &handoffRig{eng: eng, reg: map[int]int{}, failReg: -1}
	r.newTenant(t, 1)
	w := &handoffWire{log: zerolog.Nop(), ifindex: 7, mtu: 1500}
	for q := 0; q < queues; q++ {
		w.queues = append(w.queues, q)
	}
	w.claims = newClaimSet(bpf.Config{}, func(c bpf.Config) error { r.claims = append(r.claims, c); return nil }, zerolog.Nop())
	w.open = func(ifindex, q int, u *xsk.UMEM, cfg xsk.Config) (xskSocket, error) {
		if ifindex != 7 || !u.Unaligned() || u.ChunkSize() != 2048 || cfg.RxSize != handoffRing || cfg.FillSize != handoffRing {
			t.Errorf("queue %d opened on ifindex %d, UMEM unaligned %v chunk %d, config %+v", q, ifindex, u.Unaligned(), u.ChunkSize(), cfg)
		}
		s := &fakeSock{q: q, fd: 100 + q, mem: u.Bytes()}
		r.socks = append(r.socks, s)
		return s, nil
	}
	w.register = func(q, fd int) error {
		if q == r.failReg {
			return errors.New("map full")
		}
		r.reg[q] = fd
		return nil
	}
	w.counters = func(out map[string]uint64) { out["xdp_redirected"] = 42 }
	r.w, r.hooks = w, &claimHooks{claims: w.claims, inner: w, stats: w.stats}
	return r
}

// newTenant adds a tenant with a region of its own and makes it the rig's.
func (r *handoffRig) newTenant(t *testing.T, id int) {
	t.Helper()
	g := shm.Queues(2, 256, 1024, 64, 2048, 2*256+2*1024)
	region, err := shm.Create(g, shm.Options{Name: "vnicd-test", NoHuge: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { region.Close() })
	r.ten, err = r.eng.AddTenant(nic.TenantConfig{ID: id, Name: "t", Match: nic.Match{Proto: rss.ProtoUDP, DstPortLo: 9000, DstPortHi: 9099}}, region)
	if err != nil {
		t.Fatal(err)
	}
	if r.cl, err = client.Local(region, client.Options{}); err != nil {
		t.Fatal(err)
	}
}

// deliver puts n synthetic frames on the wire, spread over the sockets,
// runs the hand-off and returns the frames the tenant received, checking
// that each lies in the buffer the kernel wrote it into.
func (r *handoffRig) deliver(t *testing.T, n int) int {
	t.Helper()
	gen, err := synth.New(synth.Config{FrameSize: 64, Flows: 64, Dist: synth.Uniform, DstPortLo: 9000, DstPortHi: 9099, Seed: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sent [][]byte
	for len(sent) < n {
		for _, f := range gen.Next(make([][]byte, 0, 32)) {
			if len(sent) < n {
				s := r.socks[len(r.socks)-len(r.w.socks)+len(sent)%len(r.w.socks)]
				if !s.wire(f) {
					t.Fatalf("socket of queue %d has no fill address posted", s.q)
				}
				sent = append(sent, append([]byte(nil), f...))
			}
		}
	}
	got := 0
	for step := 0; step < 200 && got < n; step++ {
		r.w.src.Recv(nil)
		for q := 0; q < r.cl.Queues(); q++ {
			pk, _ := r.cl.Queue(q).Recv(nil)
			for _, p := range pk {
				mem, _ := r.ten.Region.Buffer(p.Buf)
				if &p.Data[0] != &mem[0] || len(p.Data) != 64 {
					t.Fatalf("packet of %d bytes does not start at its buffer %d", len(p.Data), p.Buf)
				}
				found := false
				for _, f := range sent {
					found = found || bytes.Equal(f, p.Data)
				}
				if !found {
					t.Fatalf("buffer %d holds a frame that was not sent", p.Buf)
				}
			}
			got += len(pk)
			r.cl.Queue(q).Release(pk)
		}
	}
	return got
}

// TestHandoffWiring: a tenant's attach opens one socket per RX queue over
// its region, registers each in the XDP map and claims its rule; frames the
// kernel writes into posted buffers reach the tenant without a copy; a
// second tenant is refused; detach closes the sockets and drops the claim,
// and the counters of closed sockets are kept.
func TestHandoffWiring(t *testing.T) {
	r := newHandoffRig(t, 2)
	if err := r.hooks.Attach(r.eng, r.ten); err != nil {
		t.Fatal(err)
	}
	if len(r.socks) != 2 || r.reg[0] != 100 || r.reg[1] != 101 {
		t.Fatalf("sockets %d, registered %v", len(r.socks), r.reg)
	}
	if len(r.claims) != 1 || len(r.claims[0].Claims) != 1 || r.claims[0].Claims[0] != (bpf.Claim{Proto: rss.ProtoUDP, PortLo: 9000, PortHi: 9099}) {
		t.Fatalf("claims %+v", r.claims)
	}
	r.w.src.Recv(nil) // the first step posts the Ax rings' buffers
	if got := r.deliver(t, 300); got != 300 {
		t.Fatalf("tenant received %d of 300 frames; %v; %v", got, r.hooks.Stats(), r.eng.Global().Snapshot().Map())
	}
	st := r.hooks.Stats()
	if st["handoff_frames"] != 300 || st["xsk_rx_frames"] != 300 || st["handoff_copies"] != 0 || st["handoff_bad_frames"] != 0 || st["xdp_redirected"] != 42 {
		t.Fatalf("stats %v", st)
	}
	other := &nic.Tenant{ID: 2, Name: "t2", Region: r.ten.Region}
	if err := r.hooks.Attach(r.eng, other); err == nil || !strings.Contains(err.Error(), "single tenant") {
		t.Fatalf("a second tenant: %v", err)
	}
	r.hooks.Detach(r.eng, other) // not attached: no effect
	if r.socks[0].closed {
		t.Fatal("detaching a tenant that is not attached closed the sockets")
	}
	r.hooks.Detach(r.eng, r.ten)
	if !r.socks[0].closed || !r.socks[1].closed || r.w.ten != nil {
		t.Fatal("sockets left open after detach")
	}
	if last := r.claims[len(r.claims)-1]; len(last.Claims) != 0 {
		t.Fatalf("claim left after detach: %+v", last)
	}
	if st := r.hooks.Stats(); st["handoff_frames"] != 300 || st["xsk_rx_frames"] != 300 {
		t.Fatalf("counters lost at detach: %v", st)
	}

	// The next tenant's attach opens new sockets, and the counters add up.
	r.eng.RemoveTenant(r.ten)
	r.newTenant(t, 2)
	if err := r.hooks.Attach(r.eng, r.ten); err != nil {
		t.Fatal(err)
	}
	r.w.src.Recv(nil)
	if got := r.deliver(t, 100); got != 100 {
		t.Fatalf("after re-attach the tenant received %d of 100 frames", got)
	}
	if st := r.hooks.Stats(); st["handoff_frames"] != 400 || st["xsk_rx_frames"] != 400 {
		t.Fatalf("counters over two attaches: %v", st)
	}
	r.hooks.Detach(r.eng, r.ten)
}

// TestHandoffBadDescriptor: a descriptor that does not point at a buffer's
// start is counted, not delivered.
func TestHandoffBadDescriptor(t *testing.T) {
	r := newHandoffRig(t, 1)
	if err := r.hooks.Attach(r.eng, r.ten); err != nil {
		t.Fatal(err)
	}
	defer r.hooks.Detach(r.eng, r.ten)
	r.w.src.Recv(nil)
	s := r.socks[0]
	s.rx = append(s.rx, xsk.Desc{Addr: s.fill[0] + 17 | xsk.Headroom<<48, Len: 64})
	r.w.src.Recv(nil)
	if st := r.hooks.Stats(); st["handoff_bad_frames"] != 1 || st["handoff_frames"] != 0 {
		t.Fatalf("stats %v", st)
	}
}

// TestHandoffAttachFails: a socket that cannot be registered refuses the
// attach, closes every socket opened for it and claims nothing.
func TestHandoffAttachFails(t *testing.T) {
	r := newHandoffRig(t, 2)
	r.failReg = 1
	if err := r.hooks.Attach(r.eng, r.ten); err == nil || !strings.Contains(err.Error(), "map full") {
		t.Fatalf("attach: %v", err)
	}
	if len(r.socks) != 2 || !r.socks[0].closed || !r.socks[1].closed || r.w.ten != nil || len(r.claims) != 0 {
		t.Fatalf("a refused attach left state: %d sockets, tenant %v, claims %v", len(r.socks), r.w.ten, r.claims)
	}
	// The claim set refusing (a full table) undoes the sockets too.
	r.failReg = -1
	r.w.claims.set = func(bpf.Config) error { return errors.New("no room") }
	if err := r.hooks.Attach(r.eng, r.ten); err == nil || !strings.Contains(err.Error(), "no room") {
		t.Fatalf("attach: %v", err)
	}
	if r.w.ten != nil || !r.socks[2].closed || !r.socks[3].closed {
		t.Fatal("sockets left open after the claim was refused")
	}
	// A region whose buffers do not start on a page cannot carry a UMEM.
	reg := *r.ten.Region
	reg.Lay.Buf = 100
	bad := &nic.Tenant{ID: 3, Name: "bad", Region: &reg}
	if err := r.hooks.Attach(r.eng, bad); err == nil || !strings.Contains(err.Error(), "not on a page") {
		t.Fatalf("unaligned buffer section: %v", err)
	}
}
