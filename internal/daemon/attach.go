//go:build linux

package daemon

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
)

// errReplyFailed: the attach reply could not be sent (the tenant was
// detached again); the connection is closed.
var errReplyFailed = errors.New("attach reply failed")

// maxRingEntries bounds the ring sizes an attach may ask for before any
// arithmetic or conversion to the region's uint32 fields.
const maxRingEntries = 1 << 24

// attachPlan is an attach request that passed attachCheck, with what
// the check derived from it.
type attachPlan struct {
	req     proto.Attach
	pid     int32
	uid     uint32
	match   nic.Match
	hostKey rss.Key // the host's own RSS key; nil: vnicd's
	hostMAC [6]byte
	geo     shm.Geometry
	bufs    int   // buffers in the region
	size    int64 // region bytes counted against the memory budget
	noHuge  bool
}

// info is the tenant's record as it attaches as tenant id.
func (p *attachPlan) info(id int) proto.TenantInfo {
	return proto.TenantInfo{ID: id, Name: p.req.Name, PID: p.pid, UID: p.uid, Queues: p.req.Queues, Match: p.req.Match, Host: p.req.Host}
}

// attach serves a TAttach request from the client on conn: it checks the
// request, reserves the tenant's id, name, claim and memory, builds its
// region, doorbells and engine tenant, and replies with the descriptors.
// A refusal or a failure is returned for the client; errReplyFailed
// means the reply could not be sent, and the connection is to close.
func (d *Daemon) attach(conn *proto.Conn, req proto.Attach, pid int32, uid uint32, log zerolog.Logger, reply func(proto.Type, any, ...int) bool) (*tenant, error) {
	p, err := d.attachCheck(req, pid, uid, log)
	if err != nil {
		return nil, err
	}
	id, err := d.attachReserve(p)
	if err != nil {
		return nil, err
	}
	t, theirs, err := d.attachBuild(p, id, conn)
	if err != nil {
		d.attachRelease(id, p.size)
		return nil, err
	}
	defer closeFDs(theirs) // sent to the tenant (or not): vnicd keeps only its copies
	if !d.attachReply(t, theirs, reply) {
		d.detachID(id, "reply failed")
		return nil, errReplyFailed
	}
	log.Info().Int("tenant", id).Str("name", req.Name).Int("queues", req.Queues).Int("buffers", p.bufs).Int64("region_bytes", p.size).
		Bool("huge_pages", t.region.Huge).Interface("match", req.Match).Msg("tenant attached")
	return t, nil
}

// attachCheck validates an attach request against the configuration and
// the per-tenant limits, and sizes its rings, buffers and region. It
// reads no tenant table: attachReserve checks what depends on the others.
func (d *Daemon) attachCheck(req proto.Attach, pid int32, uid uint32, log zerolog.Logger) (*attachPlan, error) {
	lim := d.cfg.Limits
	if req.Queues < 1 || req.Queues > d.cfg.MaxQueues {
		d.ctl.refusedGeometry.Add(1)
		return nil, fmt.Errorf("asked for %d queues; vnicd allows 1..%d", req.Queues, d.cfg.MaxQueues)
	}
	if err := checkName(req.Name, lim.MaxName); err != nil {
		d.ctl.refusedName.Add(1)
		return nil, err
	}
	// Under --policy pause several tenants may attach: the engine bounds
	// each tenant's stalls (--pause-max, nic.Config.PauseMax), so a stuck
	// tenant falls back to drop alone and cannot stop the others.
	match, err := parseMatch(req.Match)
	if err != nil {
		d.ctl.refusedClaim.Add(1)
		return nil, err
	}
	p := &attachPlan{req: req, pid: pid, uid: uid}
	if req.Host != nil {
		if p.hostKey, p.hostMAC, err = hostMatch(req.Host, &match); err != nil {
			d.ctl.refusedClaim.Add(1)
			return nil, err
		}
	} else if d.requireHost {
		d.ctl.refusedClaim.Add(1)
		return nil, fmt.Errorf("vnicd's source (%s) routes between hosts: say which host this tenant is, with its IPv4 address (client.AttachOptions.Host), e.g. 198.18.0.1", d.cfg.SourceName)
	}
	p.match = match
	pick := func(v, def int) int {
		if v == 0 {
			return def
		}
		return v
	}
	bxs, txs := pick(req.BxSize, d.cfg.BxSize), pick(req.TxSize, d.cfg.TxSize)
	// A tenant that does not choose gets Ax rings large enough that its
	// queues together can fill a Bx ring (k·|Ax| >= |Bx|, docs/design.md §2).
	ax := req.AxSize
	if ax == 0 {
		ax = d.cfg.AxSize
		if bxs >= 2 && bxs <= maxRingEntries {
			ax = shm.SizedAx(d.cfg.AxSize, bxs, req.Queues)
		}
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"bx_size", bxs}, {"tx_size", txs}, {"ax_size", ax}} {
		if v.n < 2 || v.n > maxRingEntries {
			d.ctl.refusedGeometry.Add(1)
			return nil, fmt.Errorf("%s %d is out of range; give a power of two in [2, %d]", v.name, v.n, maxRingEntries)
		}
	}
	bufs := req.Buffers
	if bufs < 0 || bufs > shm.MaxBufCount {
		d.ctl.refusedGeometry.Add(1)
		return nil, fmt.Errorf("buffers %d is out of range; give 0 (the default) or 1..%d", bufs, shm.MaxBufCount)
	}
	if bufs == 0 {
		bufs = req.Queues*(ax+txs) + 2*bxs // at most 64*2^25+2^25: no overflow
		if d.cfg.BuffersPerQueue > 0 {
			bufs = req.Queues * d.cfg.BuffersPerQueue
		}
		if bufs > shm.MaxBufCount {
			d.ctl.refusedGeometry.Add(1)
			return nil, fmt.Errorf("these ring sizes need %d buffers, more than %d; give smaller rings or buffers explicitly", bufs, shm.MaxBufCount)
		}
	}
	p.bufs = bufs
	p.geo = shm.Queues(req.Queues, ax, bxs, txs, d.cfg.BufSize, bufs)
	p.geo.Model = uint32(d.eng.Config().Model)
	if err := p.geo.Validate(); err != nil {
		d.ctl.refusedGeometry.Add(1)
		return nil, err
	}
	for _, a := range p.geo.SizingAdvice() {
		const msg = "tenant's geometry could be better"
		if ev := d.warn(log, uid, msg); ev != nil {
			ev.Str("name", req.Name).Str("advice", a).Msg("tenant's geometry: " + a)
		}
	}
	p.size = int64(p.geo.Layout().Total)
	p.noHuge = d.cfg.NoHugePages || !lim.HugePages
	if !p.noHuge {
		p.size = (p.size + 2<<20 - 1) &^ (2<<20 - 1) // a huge-page region rounds up to 2 MiB
	}
	if p.size > lim.MaxRegionBytes {
		d.ctl.refusedRegion.Add(1)
		return nil, fmt.Errorf("this geometry needs a region of %d MiB, more than the per-tenant limit of %d MiB (--max-region); ask for fewer queues, smaller rings or fewer buffers", p.size>>20, lim.MaxRegionBytes>>20)
	}
	return p, nil
}

// parseMatch turns a request's match rule into the engine's.
func parseMatch(m proto.Match) (nic.Match, error) {
	var out nic.Match
	switch strings.ToLower(m.Proto) {
	case "":
	case "udp":
		out.Proto = rss.ProtoUDP
	case "tcp":
		out.Proto = rss.ProtoTCP
	default:
		return out, fmt.Errorf("match protocol %q: use udp, tcp or leave it empty", m.Proto)
	}
	lo, hi := m.DstPortLo, m.DstPortHi
	if hi == 0 {
		hi = lo // dst_port_lo alone is one port
	}
	if hi < lo {
		return out, fmt.Errorf("match port range %d-%d is empty; give low <= high", lo, hi)
	}
	out.DstPortLo, out.DstPortHi = lo, hi
	if m.Dst != "" {
		p, err := netip.ParsePrefix(m.Dst)
		if err != nil {
			a, aerr := netip.ParseAddr(m.Dst)
			if aerr != nil {
				return out, fmt.Errorf("match destination %q is not an address or prefix", m.Dst)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out.Dst = p
	}
	out.Default = m.Default
	return out, nil
}

// hostMatch checks a tenant's host identity and narrows its match rule to
// the host's address; it normalises h (the MAC, 02:00 and the address's
// four bytes when not given) and returns the host's own RSS key (nil:
// vnicd's) and its MAC.
func hostMatch(h *proto.Host, m *nic.Match) (key rss.Key, mac [6]byte, err error) {
	a, err := netip.ParseAddr(h.Addr)
	if err != nil || !a.Is4() {
		return nil, mac, fmt.Errorf("host address %q is not an IPv4 address; give one, e.g. 198.18.0.1", h.Addr)
	}
	p := netip.PrefixFrom(a, 32)
	if m.Dst.IsValid() && m.Dst != p {
		return nil, mac, fmt.Errorf("match destination %s differs from the host's address %s; leave the match's destination empty (a host claims its address)", m.Dst, a)
	}
	m.Dst = p
	m.Default = false // a host claims its own address, nothing more
	if h.MAC == "" {
		b := a.As4()
		mac = [6]byte{0x02, 0x00, b[0], b[1], b[2], b[3]}
	} else if hw, err := net.ParseMAC(h.MAC); err != nil || len(hw) != 6 {
		return nil, mac, fmt.Errorf("host MAC %q is not an Ethernet address; give six hex bytes, e.g. 02:00:c6:12:00:01, or leave it empty", h.MAC)
	} else {
		mac = [6]byte(hw)
	}
	h.MAC = net.HardwareAddr(mac[:]).String()
	if h.Key == "" {
		return nil, mac, nil
	}
	k, err := hex.DecodeString(h.Key)
	if err == nil {
		err = rss.Key(k).Validate()
	}
	if err != nil {
		return nil, mac, fmt.Errorf("host RSS key: %v; give %d to %d bytes in hex, or leave it empty for vnicd's key", err, rss.KeyLen, rss.MaxKeyLen)
	}
	return rss.Key(k), mac, nil
}

// attachReserve checks the limits that count the other tenants (tenants
// in all and per uid, the name, the memory budget, the claim) and, when
// they allow it, takes the next id and p's region bytes from the memory
// budget, and holds the name and the claim while the region is built: a
// placeholder in live (nt nil) keeps concurrent attaches from taking
// them. attachRelease undoes it.
func (d *Daemon) attachReserve(p *attachPlan) (id int, err error) {
	lim := d.cfg.Limits
	req, uid, size := p.req, p.uid, p.size
	d.mu.Lock()
	defer d.mu.Unlock()
	var perUID int
	var holder *tenant
	for _, t := range d.live {
		if t.info.UID == uid {
			perUID++
		}
		if req.Name != "" && t.info.Name == req.Name {
			holder = t
		}
	}
	switch {
	case len(d.live) >= d.cfg.MaxTenants:
		d.ctl.refusedTenants.Add(1)
		return 0, fmt.Errorf("vnicd already serves %d tenants, its limit (--max-tenants)", d.cfg.MaxTenants)
	case lim.MaxTenantsPerUID > 0 && perUID >= lim.MaxTenantsPerUID:
		d.ctl.refusedTenantsUID.Add(1)
		return 0, fmt.Errorf("uid %d already has %d tenants attached, the per-uid limit (--max-tenants-per-uid); detach one or raise the flag", uid, perUID)
	case holder != nil:
		d.ctl.refusedName.Add(1)
		return 0, fmt.Errorf("tenant name %q is taken by tenant %d (pid %d); pick another name", req.Name, holder.info.ID, holder.info.PID)
	case d.shmem+size > lim.MemoryBudget:
		d.ctl.refusedBudget.Add(1)
		return 0, fmt.Errorf("this tenant's region of %d MiB would take vnicd's tenant memory to %d MiB, over its budget of %d MiB (--memory-budget); ask for a smaller geometry, or detach tenants", size>>20, (d.shmem+size)>>20, lim.MemoryBudget>>20)
	}
	if p.match.Specific() {
		if t := d.claimHolder(p.match); t != nil {
			d.ctl.refusedClaim.Add(1)
			return 0, fmt.Errorf("match rule {%s} overlaps the rule {%s} of tenant %d %q (pid %d); claims may not overlap: pick ports or addresses that tenant does not claim", req.Match, t.info.Match, t.info.ID, t.info.Name, t.info.PID)
		}
	}
	id = d.nextID
	d.nextID++
	d.shmem += size // released by detachID, or by attachRelease
	d.live[id] = &tenant{info: p.info(id), match: p.match, size: size}
	return id, nil
}

// attachRelease gives back what attachReserve took for a tenant that was
// not built.
func (d *Daemon) attachRelease(id int, size int64) {
	d.mu.Lock()
	delete(d.live, id)
	d.shmem -= size
	d.mu.Unlock()
}

// attachBuild creates tenant id's region and doorbells, adds it to the
// engine (and to the Hooks), and puts it in live in place of its
// placeholder. It returns the tenant and the doorbell descriptors to
// send, which the caller closes; on an error it closes what it made.
func (d *Daemon) attachBuild(p *attachPlan, id int, conn *proto.Conn) (*tenant, []int, error) {
	geo := p.geo
	geo.Tenant = uint32(id)
	region, err := shm.Create(geo, shm.Options{Name: fmt.Sprintf("vnic-tenant-%d", id), NoHuge: p.noHuge,
		Log: func(msg string, err error) { d.log.Info().Err(err).Msg(msg) }})
	if err != nil {
		return nil, nil, fmt.Errorf("create the region: %w", err)
	}
	wake, theirs, err := doorbells(p.req.Queues)
	if err != nil {
		region.Close()
		return nil, nil, err
	}
	var irq []int
	if p.req.Interrupts {
		var ends []int
		if irq, ends, err = interrupts(p.req.Queues); err != nil {
			closeFDs(wake)
			closeFDs(theirs)
			region.Close()
			return nil, nil, err
		}
		theirs = append(theirs, ends...)
	}
	nt, err := d.eng.AddTenant(nic.TenantConfig{ID: id, Name: p.req.Name, Match: p.match, RETASize: d.cfg.RETASize,
		Wake: wake, Interrupts: irq, Key: p.hostKey, MAC: p.hostMAC}, region)
	if err == nil && d.cfg.Hooks != nil {
		if err = d.cfg.Hooks.Attach(d.eng, nt); err != nil {
			d.eng.RemoveTenant(nt)
		}
	}
	if err != nil {
		closeFDs(wake)
		closeFDs(irq)
		closeFDs(theirs)
		region.Close()
		return nil, nil, err
	}
	var ledger func() map[string]uint64
	if d.ledgers != nil {
		ledger = d.ledgers.HostLedger(nt)
	}
	info := p.info(id)
	info.Attached = time.Now().UTC().Format(time.RFC3339)
	t := &tenant{region: region, nt: nt, wake: wake, irq: irq, conn: conn, match: p.match, size: p.size, ledger: ledger, info: info}
	d.mu.Lock()
	d.live[id] = t
	d.tenantsChanged()
	d.mu.Unlock()
	return t, theirs, nil
}

// doorbells makes one eventfd per queue, the queue's TX doorbell: vnicd
// keeps one descriptor (the engine watches it, edge-triggered, and never
// reads nor writes it) and sends the tenant a second one of the same
// eventfd. Signals the other way go through the region's futex words or
// the receive interrupts (see interrupts, and package shm, the wake
// section), and nothing vnicd receives from the tenant can carry a
// descriptor: an eventfd is not a socket.
func doorbells(n int) (ours, theirs []int, err error) {
	for i := 0; i < n; i++ {
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err == nil {
			var dup int
			if dup, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err != nil {
				unix.Close(fd)
			} else {
				ours = append(ours, fd)
				theirs = append(theirs, dup)
				continue
			}
		}
		closeFDs(ours)
		closeFDs(theirs)
		return nil, nil, fmt.Errorf("doorbell eventfd: %w; raise the descriptor limit (ulimit -n)", os.NewSyscallError("eventfd", err))
	}
	return ours, theirs, nil
}

// interruptPipeSize is the capacity vnicd asks for each interrupt pipe:
// one page (the smallest), since a wake is one byte and the tenant drains
// them.
const interruptPipeSize = 4096

// interrupts makes one pipe per queue, the queue's receive interrupt
// (proto.Attach.Interrupts): vnicd keeps the write end, non-blocking,
// and sends the tenant the read end, non-blocking too so that the
// tenant's runtime can poll it. The two ends are separate open files:
// nothing the tenant sets on its end (flags, size aside) reaches vnicd's.
func interrupts(n int) (ours, theirs []int, err error) {
	for i := 0; i < n; i++ {
		var p [2]int
		if err = unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
			closeFDs(ours)
			closeFDs(theirs)
			return nil, nil, fmt.Errorf("interrupt pipe: %w; raise the descriptor limit (ulimit -n)", os.NewSyscallError("pipe2", err))
		}
		unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, interruptPipeSize) // best effort: the default is 16 pages
		ours = append(ours, p[1])
		theirs = append(theirs, p[0])
	}
	return ours, theirs, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// attachReply sends the attach reply with t's region and the doorbell
// descriptors theirs (false: it could not be sent). The reply echoes what
// the region holds (its header is what the client maps), not what was
// asked.
func (d *Daemon) attachReply(t *tenant, theirs []int, reply func(proto.Type, any, ...int) bool) bool {
	nt, region := t.nt, t.region
	reta := make([]uint16, nt.RETA().Size())
	for i := range reta {
		reta[i] = uint16(nt.RETA().Entry(i))
	}
	fds := append([]int{region.FD()}, theirs...)
	g := region.Geo
	rep := proto.AttachReply{Tenant: t.info.ID, Model: d.eng.Config().Model.String(), FDs: len(fds),
		Geometry: proto.Geometry{NumQueues: int(g.NumBx), AxSize: int(g.AxSize), BxSize: int(g.BxSize), TxSize: int(g.TxSize), BufSize: int(g.BufSize), Buffers: int(g.BufCount), Model: int(g.Model)},
		RSS:      proto.RSS{Profile: "toeplitz", Key: hex.EncodeToString(nt.Key()), RETA: reta}}
	rep.Offloads = d.cfg.Offloads
	rep.Interrupts = t.irq != nil
	if ec := d.eng.Config(); ec.Idle == nic.IdleAdaptive {
		rep.RxCoalesceUs = int(ec.RxCoalesce / time.Microsecond)
	}
	return reply(proto.TAttachReply, rep, fds...)
}
