//go:build linux

package daemon

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
)

// Config is vnicd's configuration.
type Config struct {
	Socket      string // control socket path
	SocketGroup int    // gid for the socket (-1: leave it)
	Engine      nic.Config
	Source      nic.Source
	SourceName  string // "synth", "xsk", ...
	SourceMode  string // e.g. "xdp native, af_xdp copy"
	// SourceStats, if set, returns the source's own counters (AF_XDP
	// statistics) for vnicctl counters.
	SourceStats func() map[string]uint64
	// OnAttach, if set, is called after a tenant was added to the engine;
	// an error refuses the attach (the tenant is removed again). OnDetach,
	// if set, is called before a tenant attached this way is removed. The
	// zero-copy hand-off opens and closes its sockets there.
	OnAttach func(eng *nic.Engine, t *nic.Tenant) error
	OnDetach func(eng *nic.Engine, t *nic.Tenant)
	// Defaults for tenants that do not ask for sizes.
	AxSize, BxSize, TxSize, BufSize int
	// BuffersPerQueue is the default buffer count per queue (0: ax+2*bx... see Attach).
	BuffersPerQueue int
	MaxQueues       int
	MaxTenants      int
	HistorySize     int
	RETASize        int
	NoHugePages     bool
	Log             zerolog.Logger
	Version         string
	MetricsAddr     string
}

// Daemon is a running vnicd.
type Daemon struct {
	cfg    Config
	log    zerolog.Logger
	eng    *nic.Engine
	start  time.Time
	mu     sync.Mutex
	nextID int
	live   map[int]*tenant
	hist   []proto.TenantStats
	ln     *net.UnixListener
	conns  sync.WaitGroup
	open   map[*proto.Conn]struct{}
}

type tenant struct {
	info   proto.TenantInfo
	region *shm.Region
	nt     *nic.Tenant
	wake   []*os.File
	conn   *proto.Conn
}

// New checks the configuration and builds the engine.
func New(cfg Config) (*Daemon, error) {
	if cfg.Socket == "" {
		cfg.Socket = "/run/vnic/vnicd.sock"
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.AxSize, 128)
	def(&cfg.BxSize, 1024)
	def(&cfg.TxSize, 256)
	def(&cfg.BufSize, 2048)
	def(&cfg.MaxQueues, 64)
	def(&cfg.MaxTenants, 64)
	def(&cfg.HistorySize, 64)
	def(&cfg.RETASize, rss.DefaultRETASize)
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	d := &Daemon{cfg: cfg, log: cfg.Log, live: map[int]*tenant{}, open: map[*proto.Conn]struct{}{}, nextID: 1}
	ecfg := cfg.Engine
	userFault := ecfg.OnFault
	ecfg.OnFault = func(t *nic.Tenant, err error) {
		d.log.Error().Err(err).Int("tenant", t.ID).Str("name", t.Name).
			Msg("tenant wrote corrupt ring state; its frames are dropped and it is being detached")
		go d.detachID(t.ID, "faulty: "+err.Error())
		if userFault != nil {
			userFault(t, err)
		}
	}
	eng, err := nic.New(ecfg)
	if err != nil {
		return nil, err
	}
	d.eng = eng
	return d, nil
}

// Engine returns the engine (for metrics and tests).
func (d *Daemon) Engine() *nic.Engine { return d.eng }

// listen creates the socket, replacing a stale one left by a dead vnicd.
func (d *Daemon) listen() error {
	path := d.cfg.Socket
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create the socket's directory: %w", err)
	}
	if _, err := os.Lstat(path); err == nil {
		c, err := net.DialTimeout("unixpacket", path, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return fmt.Errorf("another vnicd is listening on %s; stop it, or give this one --socket PATH", path)
		}
		d.log.Info().Str("socket", path).Msg("removing the stale socket of a vnicd that did not stop cleanly")
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("listen on %s: %w; run vnicd as root or give it a --socket in a directory it may write", path, err)
		}
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if d.cfg.SocketGroup >= 0 {
		os.Chown(path, -1, d.cfg.SocketGroup)
	}
	d.ln = ln
	return nil
}

// Run serves until ctx ends, then detaches every tenant and removes the
// socket.
func (d *Daemon) Run(ctx context.Context) error {
	d.start = time.Now()
	if err := d.listen(); err != nil {
		return err
	}
	d.log.Info().Str("socket", d.cfg.Socket).Str("model", d.eng.Config().Model.String()).
		Str("policy", d.eng.Config().Policy.String()).Str("source", d.cfg.SourceName).
		Str("mode", d.cfg.SourceMode).Int("emulator_cpu", d.eng.Config().EmulatorCPU).Msg("vnicd listening")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	engErr := make(chan error, 1)
	go func() { engErr <- d.eng.Run(ctx, d.cfg.Source) }()
	select {
	case <-d.eng.Started():
	case err := <-engErr:
		d.ln.Close()
		return fmt.Errorf("the emulated NIC did not start: %w", err)
	}
	go func() {
		<-ctx.Done()
		d.ln.Close()
	}()
	var metrics func()
	if d.cfg.MetricsAddr != "" {
		stop, err := d.serveMetrics(d.cfg.MetricsAddr)
		if err != nil {
			cancel()
			<-engErr
			return err
		}
		metrics = stop
	}
	for {
		c, err := d.ln.AcceptUnix()
		if err != nil {
			break
		}
		conn := proto.NewConn(c)
		d.mu.Lock()
		d.open[conn] = struct{}{}
		d.mu.Unlock()
		d.conns.Add(1)
		go d.serve(conn)
	}
	cancel()
	err := <-engErr
	d.mu.Lock()
	for c := range d.open {
		c.Close()
	}
	d.mu.Unlock()
	d.conns.Wait()
	if metrics != nil {
		metrics()
	}
	d.log.Info().Msg("vnicd stopped; every tenant detached")
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

func peer(c *net.UnixConn) (pid int32, uid uint32) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0
	}
	raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid, uid = cred.Pid, cred.Uid
		}
	})
	return pid, uid
}

func (d *Daemon) serve(conn *proto.Conn) {
	defer d.conns.Done()
	pid, uid := peer(conn.Unix())
	log := d.log.With().Int32("peer_pid", pid).Uint32("peer_uid", uid).Logger()
	log.Debug().Msg("control connection")
	var mine *tenant
	defer func() {
		conn.Close()
		d.mu.Lock()
		delete(d.open, conn)
		d.mu.Unlock()
		if mine != nil {
			d.detachID(mine.info.ID, "connection closed")
		}
	}()
	for {
		t, body, files, err := conn.Recv()
		for _, f := range files {
			f.Close() // clients send no descriptors
		}
		if err != nil {
			if errors.Is(err, proto.ErrVersion) {
				conn.Send(proto.TError, proto.Error{Message: err.Error(), Version: proto.Version})
				log.Warn().Err(err).Msg("client speaks another protocol version")
			} else if !errors.Is(err, proto.ErrClosed) && !errors.Is(err, net.ErrClosed) {
				log.Debug().Err(err).Msg("control connection ended")
			}
			return
		}
		var rerr error
		switch t {
		case proto.TAttach:
			if mine != nil {
				rerr = errors.New("this connection already holds a tenant; open another connection for a second one")
				break
			}
			var req proto.Attach
			if rerr = json.Unmarshal(body, &req); rerr != nil {
				break
			}
			mine, rerr = d.attach(conn, req, pid, uid, log)
		case proto.TDetach:
			if mine != nil {
				d.detachID(mine.info.ID, "detach requested")
				mine = nil
			}
			rerr = conn.Send(proto.TOK, nil)
		case proto.TTenants:
			rerr = conn.Send(proto.TTenantsRep, d.tenants())
		case proto.TStats:
			rerr = conn.Send(proto.TStatsReply, d.Stats())
		case proto.TStatus:
			rerr = conn.Send(proto.TStatusReply, d.status())
		case proto.TConfig:
			rerr = conn.Send(proto.TConfigReply, d.config())
		default:
			rerr = fmt.Errorf("unknown request type %d", t)
		}
		if rerr != nil {
			conn.Send(proto.TError, proto.Error{Message: rerr.Error()})
		}
	}
}

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
	if m.DstPortHi < m.DstPortLo {
		return out, fmt.Errorf("match port range %d-%d is empty; give low <= high", m.DstPortLo, m.DstPortHi)
	}
	out.DstPortLo, out.DstPortHi = m.DstPortLo, m.DstPortHi
	if m.DstPortLo != 0 && m.DstPortHi == 0 {
		out.DstPortHi = m.DstPortLo
	}
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

func (d *Daemon) attach(conn *proto.Conn, req proto.Attach, pid int32, uid uint32, log zerolog.Logger) (*tenant, error) {
	if req.Queues < 1 || req.Queues > d.cfg.MaxQueues {
		return nil, fmt.Errorf("asked for %d queues; vnicd allows 1..%d", req.Queues, d.cfg.MaxQueues)
	}
	match, err := parseMatch(req.Match)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if len(d.live) >= d.cfg.MaxTenants {
		d.mu.Unlock()
		return nil, fmt.Errorf("vnicd already serves %d tenants, its limit", d.cfg.MaxTenants)
	}
	id := d.nextID
	d.nextID++
	d.mu.Unlock()
	pick := func(v, def int) int {
		if v == 0 {
			return def
		}
		return v
	}
	ax, bxs, txs := pick(req.AxSize, d.cfg.AxSize), pick(req.BxSize, d.cfg.BxSize), pick(req.TxSize, d.cfg.TxSize)
	bufs := req.Buffers
	if bufs == 0 {
		bufs = req.Queues*(ax+txs) + 2*bxs
		if d.cfg.BuffersPerQueue > 0 {
			bufs = req.Queues * d.cfg.BuffersPerQueue
		}
	}
	geo := shm.Queues(req.Queues, ax, bxs, txs, d.cfg.BufSize, bufs)
	geo.Tenant = uint32(id)
	geo.Model = uint32(d.eng.Config().Model)
	if err := geo.Validate(); err != nil {
		return nil, err
	}
	region, err := shm.Create(geo, shm.Options{Name: fmt.Sprintf("vnic-tenant-%d", id), NoHuge: d.cfg.NoHugePages, Log: &d.log})
	if err != nil {
		return nil, fmt.Errorf("create the region: %w", err)
	}
	wake := make([]*os.File, req.Queues)
	for i := range wake {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			for _, f := range wake[:i] {
				f.Close()
			}
			region.Close()
			return nil, fmt.Errorf("eventfd: %w", os.NewSyscallError("eventfd", err))
		}
		wake[i] = os.NewFile(uintptr(fd), "vnic-wake")
	}
	wakeFDs := make([]int, len(wake))
	for i, f := range wake {
		wakeFDs[i] = int(f.Fd())
	}
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	nt, err := d.eng.AddTenant(nic.TenantConfig{ID: id, Name: req.Name, Match: match, RETASize: d.cfg.RETASize,
		Wakeup: func(q int) { unix.Write(wakeFDs[q], one) }}, region)
	if err == nil && d.cfg.OnAttach != nil {
		if err = d.cfg.OnAttach(d.eng, nt); err != nil {
			d.eng.RemoveTenant(nt)
		}
	}
	if err != nil {
		for _, f := range wake {
			f.Close()
		}
		region.Close()
		return nil, err
	}
	t := &tenant{region: region, nt: nt, wake: wake, conn: conn, info: proto.TenantInfo{
		ID: id, Name: req.Name, PID: pid, UID: uid, Queues: req.Queues, Match: req.Match, Attached: time.Now().UTC().Format(time.RFC3339)}}
	d.mu.Lock()
	d.live[id] = t
	d.mu.Unlock()
	reta := make([]uint16, nt.RETA().Size())
	for i := range reta {
		reta[i] = uint16(nt.RETA().Entry(i))
	}
	fds := append([]int{region.FD()}, wakeFDs...)
	rep := proto.AttachReply{Tenant: id, Model: d.eng.Config().Model.String(), FDs: len(fds),
		Geometry: proto.Geometry{NumQueues: req.Queues, AxSize: ax, BxSize: bxs, TxSize: txs, BufSize: d.cfg.BufSize, Buffers: bufs, Model: int(geo.Model)},
		RSS:      proto.RSS{Profile: "toeplitz", Key: hex.EncodeToString(d.eng.Config().Key), RETA: reta}}
	if err := conn.Send(proto.TAttachReply, rep, fds...); err != nil {
		d.detachID(id, "reply failed")
		return nil, err
	}
	log.Info().Int("tenant", id).Str("name", req.Name).Int("queues", req.Queues).Int("buffers", bufs).
		Bool("huge_pages", region.Huge).Interface("match", req.Match).Msg("tenant attached")
	return t, nil
}

// detachID removes a tenant from the engine, records its counters in the
// history and releases its region.
func (d *Daemon) detachID(id int, why string) {
	d.mu.Lock()
	t, ok := d.live[id]
	if ok {
		delete(d.live, id)
	}
	d.mu.Unlock()
	if !ok {
		return
	}
	if d.cfg.OnDetach != nil {
		d.cfg.OnDetach(d.eng, t.nt)
	}
	d.eng.RemoveTenant(t.nt)
	st := tenantStats(t)
	st.Detached = time.Now().UTC().Format(time.RFC3339)
	if e := t.nt.Faulty(); e != nil {
		st.Faulty = e.Error()
	}
	d.mu.Lock()
	d.hist = append(d.hist, st)
	if len(d.hist) > d.cfg.HistorySize {
		d.hist = d.hist[len(d.hist)-d.cfg.HistorySize:]
	}
	d.mu.Unlock()
	for _, f := range t.wake {
		f.Close()
	}
	t.region.Close()
	if why != "connection closed" && why != "detach requested" {
		t.conn.Close() // a faulty tenant is disconnected
	}
	d.log.Info().Int("tenant", id).Str("name", t.info.Name).Str("why", why).Msg("tenant detached; counters kept in history")
}

func tenantStats(t *tenant) proto.TenantStats {
	st := proto.TenantStats{TenantInfo: t.info}
	for q := 0; q < int(t.region.Geo.NumBx); q++ {
		rs := proto.RingStats{Queue: q,
			NIC:    t.region.Counters(shm.NICBlock, q).Snapshot().Map(),
			Client: t.region.Counters(shm.ClientBlock, q).Snapshot().Map()}
		if p, c, ok := ring.Cursors(t.region.AxMem(q)); ok {
			rs.AxFill = int(min(p-c, uint64(t.region.Geo.AxSize))) // untrusted: clamp
		}
		st.Rings = append(st.Rings, rs)
	}
	return st
}

// Stats returns every counter.
func (d *Daemon) Stats() proto.Stats {
	s := proto.Stats{Global: d.eng.Global().Snapshot().Map()}
	if d.cfg.SourceStats != nil {
		s.Source = d.cfg.SourceStats()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.sorted() {
		s.Tenants = append(s.Tenants, tenantStats(t))
	}
	s.History = append(s.History, d.hist...)
	return s
}

func (d *Daemon) sorted() []*tenant {
	out := make([]*tenant, 0, len(d.live))
	for id := 1; id < d.nextID; id++ {
		if t, ok := d.live[id]; ok {
			out = append(out, t)
		}
	}
	return out
}

func (d *Daemon) tenants() proto.Tenants {
	d.mu.Lock()
	defer d.mu.Unlock()
	var r proto.Tenants
	for _, t := range d.sorted() {
		info := t.info
		if e := t.nt.Faulty(); e != nil {
			info.Faulty = e.Error()
		}
		r.Tenants = append(r.Tenants, info)
	}
	for _, h := range d.hist {
		r.History = append(r.History, h.TenantInfo)
	}
	return r
}

func (d *Daemon) status() proto.Status {
	d.mu.Lock()
	n := len(d.live)
	d.mu.Unlock()
	ec := d.eng.Config()
	return proto.Status{Version: d.cfg.Version, PID: os.Getpid(), Uptime: time.Since(d.start).Round(time.Second).String(),
		Model: ec.Model.String(), Policy: ec.Policy.String(), Source: d.cfg.SourceName, Mode: d.cfg.SourceMode,
		Tenants: n, Emulator: ec.EmulatorCPU, Socket: d.cfg.Socket, Metrics: d.cfg.MetricsAddr}
}

func (d *Daemon) config() proto.Config {
	ec := d.eng.Config()
	return proto.Config{
		"model": ec.Model.String(), "policy": ec.Policy.String(), "key": hex.EncodeToString(ec.Key),
		"emulator_cpu": fmt.Sprint(ec.EmulatorCPU), "ax_size": fmt.Sprint(d.cfg.AxSize), "bx_size": fmt.Sprint(d.cfg.BxSize),
		"tx_size": fmt.Sprint(d.cfg.TxSize), "buf_size": fmt.Sprint(d.cfg.BufSize), "reta_size": fmt.Sprint(d.cfg.RETASize),
		"max_queues": fmt.Sprint(d.cfg.MaxQueues), "max_tenants": fmt.Sprint(d.cfg.MaxTenants), "socket": d.cfg.Socket,
		"source": d.cfg.SourceName, "source_mode": d.cfg.SourceMode, "metrics_addr": d.cfg.MetricsAddr,
	}
}
