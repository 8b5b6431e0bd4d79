//go:build linux

package daemon

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/pages"
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
	// Hooks, if set, joins the source to the tenants' lifecycle and
	// reports its counters (see Hooks).
	Hooks Hooks
	// RequireHost refuses tenants that do not say which host they are
	// (proto.Attach.Host): the emulated network (--source fabric) routes
	// by host address.
	RequireHost bool
	// HostLedger, if set, returns for an attached tenant a function that
	// reads its ledger on the emulated network (TenantStats.Fabric); the
	// function keeps working after the tenant detached (its history).
	HostLedger func(t *nic.Tenant) func() map[string]uint64
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
	// Limits bound what clients can make vnicd hold (zero fields: defaults).
	Limits Limits
	// AdminGroup, if set, is the gid (--admin-group) whose members get a
	// reserve of control connections of their own, beside root's
	// (Limits.ReservedConns; reserve.go). A peer is a member when the gid
	// is its effective gid or one of its supplementary groups at connect
	// time.
	AdminGroup *uint32
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
	open   map[*proto.Conn]*connState
	// Under mu: the ordinary connections, in all and per uid, and each
	// class's reserve (reserve.go; nil for classOrdinary).
	ordinary int
	byUID    map[uint32]int
	reserve  [numClasses]map[*proto.Conn]*connState
	connSeq  uint64
	ctl      control
	// Region bytes of attached tenants and of attaches in progress (the
	// memory budget), under mu.
	shmem    int64
	histSeq  uint64
	histSeqs []uint64 // sequence of each hist entry
	// histLedgers holds each hist entry's ledger function (nil: none):
	// a detached host's ledger may still change (frames it sent wait in
	// the fabric's delay line), so it is read again for each report.
	histLedgers []func() map[string]uint64
	dumps       dumpState // vnicctl dump sessions (dump.go)
	logLim      *logLimiter
	holes       holeState // tenants that punch holes (faults_linux.go)
	// noPeerGroups: the kernel lacks SO_PEERGROUPS (warned about once).
	noPeerGroups sync.Once
}

type tenant struct {
	info   proto.TenantInfo
	region *shm.Region
	nt     *nic.Tenant
	wake   []int // vnicd's copies of the queues' doorbell eventfds
	conn   *proto.Conn
	match  nic.Match
	size   int64                    // region bytes counted against the memory budget
	dump   *dumpSession             // the running dump of this tenant, under mu
	ledger func() map[string]uint64 // Config.HostLedger's; nil: none
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
	def(&cfg.BufSize, shm.DefaultBufSize)
	def(&cfg.MaxQueues, 64)
	def(&cfg.MaxTenants, 64)
	def(&cfg.HistorySize, 64)
	def(&cfg.RETASize, rss.DefaultRETASize)
	cfg.Limits.defaults()
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	d := &Daemon{cfg: cfg, log: cfg.Log, live: map[int]*tenant{}, open: map[*proto.Conn]*connState{}, byUID: map[uint32]int{}, nextID: 1,
		dumps: dumpState{live: map[*dumpSession]struct{}{}}}
	d.reserve[classAdmin] = map[*proto.Conn]*connState{}
	d.reserve[classRoot] = map[*proto.Conn]*connState{}
	d.logLim = newLogLimiter(cfg.Limits.LogBurst, cfg.Limits.LogInterval)
	d.watchFaults(&cfg)
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
		// Only a refused connection proves nobody listens: a socket this
		// user may not connect to may well be a live vnicd's.
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("%s exists and this user may not connect to it, so it may be another vnicd's; give this one --socket PATH in a directory it may write, or run it as that vnicd's user", path)
		}
		switch {
		case errors.Is(err, syscall.ENOENT): // gone since the Lstat
		case !errors.Is(err, syscall.ECONNREFUSED):
			return fmt.Errorf("%s exists and is not a socket vnicd can check (%w); remove it or give --socket PATH", path, err)
		default:
			d.log.Info().Str("socket", path).Msg("removing the stale socket of a vnicd that did not stop cleanly")
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("remove stale socket %s: %w", path, err)
			}
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
		if err := os.Chown(path, -1, d.cfg.SocketGroup); err != nil {
			ln.Close()
			return fmt.Errorf("give %s to group %d (--socket-group): %w; run vnicd as root or as a member of that group", path, d.cfg.SocketGroup, err)
		}
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
		Str("mode", d.cfg.SourceMode).Int("emulator_cpu", d.eng.Config().EmulatorCPU).
		Str("idle", d.eng.Config().Idle.String()).Dur("spin_budget", spinBudget(d.eng.Config())).Dur("rx_coalesce", d.eng.Config().RxCoalesce).Dur("rx_coalesce_max", d.eng.Config().RxCoalesceMax).Int("bx_post_batch", d.eng.Config().PostBatch).Dur("pause_max", d.eng.Config().PauseMax).Msg("vnicd listening")
	if thp, ok := pages.ShmemTHP(); !ok && thp != "" {
		d.log.Info().Str("shmem_thp", thp).Msg("tenant regions use 4 KiB pages: the host's shmem THP policy is \"" + thp + "\"; `echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled` lets them use 2 MiB pages, which saves a TLB miss per frame (docs/operations.md, Huge pages)")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	engErr := make(chan error, 1)
	go func() { engErr <- FlagHint(d.eng.Run(ctx, d.cfg.Source)) }()
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
	go d.logSummaries(ctx)
	go d.holeWatch(ctx)
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
	acceptErr := d.acceptLoop(ctx)
	cancel()
	err := <-engErr
	d.endAllDumps(time.Second) // each sends its end before the connections close
	d.mu.Lock()
	for c := range d.open {
		c.Close()
	}
	d.mu.Unlock()
	d.conns.Wait()
	if metrics != nil {
		metrics()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = nil
	}
	if err == nil {
		err = acceptErr
	}
	if err != nil {
		d.log.Error().Err(err).Msg("vnicd stopped on an error; every tenant detached")
		return err
	}
	d.log.Info().Msg("vnicd stopped; every tenant detached")
	return nil
}

// acceptLoop accepts control connections until ctx ends (nil) or the
// listener fails for good (the error). Errors a busy machine recovers from
// (out of descriptors or memory, an aborted connection) are logged at warn,
// counted as accept_errors and retried after a back-off of 5 ms doubling to
// 1 s, so a burst of clients never stops vnicd.
func (d *Daemon) acceptLoop(ctx context.Context) error {
	var backoff time.Duration
	for {
		c, err := d.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !transientAccept(err) {
				return fmt.Errorf("accept on %s: %w", d.cfg.Socket, err)
			}
			d.ctl.acceptErrors.Add(1)
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			d.log.Warn().Err(err).Dur("retry_in", backoff).Uint64("accept_errors", d.ctl.acceptErrors.Load()).
				Msg("accept failed; retrying (raise LimitNOFILE, or lower --max-conns, if this repeats)")
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		d.admit(c)
	}
}

// transientAccept reports whether an accept error is worth retrying.
func transientAccept(err error) bool {
	for _, e := range []error{unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM, unix.ECONNABORTED, unix.EINTR, unix.EAGAIN, unix.EPROTO, unix.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// admit applies the connection caps to an accepted connection and starts
// serving it, or tells the peer which limit refused it and closes it. A
// peer of a class with a reserve (reserve.go) gets a reserved connection
// once the caps refuse it an ordinary one, in place of its reserve's
// idlest connection when the reserve is full.
func (d *Daemon) admit(c *net.UnixConn) {
	cred, ok := d.peer(c)
	pid, uid := cred.pid, cred.uid
	conn := proto.NewServerConn(c, proto.MaxRequest)
	lim := d.cfg.Limits
	st := &connState{uid: uid, class: classify(uid, cred.gid, cred.groups, d.cfg.AdminGroup)}
	var (
		refuse string
		victim *proto.Conn
		vst    *connState
	)
	d.mu.Lock()
	over := lim.MaxConns > 0 && d.ordinary >= lim.MaxConns
	overUID := lim.MaxConnsPerUID > 0 && d.byUID[uid] >= lim.MaxConnsPerUID
	switch {
	case !ok:
		refuse = "vnicd could not read this connection's credentials (SO_PEERCRED), so it does not know whom it would serve"
	case !over && !overUID:
		d.ordinary++
		d.byUID[uid]++
	case st.class != classOrdinary && lim.ReservedConns > 0:
		res := d.reserve[st.class]
		if len(res) >= lim.ReservedConns {
			victim = idlest(res)
			vst = res[victim]
			delete(res, victim) // its serve ends on the close below
			d.ctl.evictedConns.Add(1)
		}
		st.reserved = true
		res[conn] = st
		d.ctl.reservedConns.Add(1)
	case over:
		d.ctl.refusedConns.Add(1)
		refuse = fmt.Sprintf("vnicd has %d control connections open, its limit (--max-conns); close idle ones or raise the flag", d.ordinary)
	default:
		d.ctl.refusedConnsUID.Add(1)
		refuse = fmt.Sprintf("uid %d has %d control connections open to vnicd, the per-uid limit (--max-conns-per-uid); close idle ones or raise the flag", uid, d.byUID[uid])
	}
	now := d.clock()
	if refuse == "" {
		d.connSeq++
		st.seq = d.connSeq
		st.last.Store(now)
		d.open[conn] = st
		d.conns.Add(1)
	}
	d.mu.Unlock()
	d.ctl.accepted.Add(1)
	if refuse != "" {
		c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		conn.Send(proto.TError, proto.Error{Message: refuse})
		c.Close()
		d.log.Debug().Int32("peer_pid", pid).Uint32("peer_uid", uid).Msg(refuse)
		return
	}
	if victim != nil {
		victim.Close()
		const msg = "closed the reserved control connection idle longest to make room for a newer one of its class (--reserved-conns)"
		if ev := d.warn(d.log, vst.uid, msg); ev != nil {
			ev.Str("class", st.class.String()).Uint32("closed_uid", vst.uid).Dur("closed_idle", time.Duration(now-vst.last.Load())).
				Int32("peer_pid", pid).Uint32("peer_uid", uid).Msg(msg)
		}
	}
	go d.serve(conn, pid, st)
}

// clock is the daemon's monotonic clock (connState.last), in nanoseconds.
func (d *Daemon) clock() int64 { return int64(time.Since(d.start)) }

// warn returns a warning event for something client uid caused, or nil
// when the limiter suppresses it (Limits.LogBurst per LogInterval per
// uid and reason; reason is the line's message, a constant). The first
// line after suppressed ones carries their count.
func (d *Daemon) warn(log zerolog.Logger, uid uint32, reason string) *zerolog.Event {
	ok, n := d.logLim.allow(logKey{uid, reason})
	if !ok {
		d.ctl.logSuppressed.Add(1)
		return nil
	}
	ev := log.Warn()
	if n > 0 {
		ev = ev.Uint64("suppressed_before", n)
	}
	return ev
}

// logSummaries logs, once per Limits.LogInterval, one line per uid and
// reason whose warnings were suppressed in the interval that ended.
func (d *Daemon) logSummaries(ctx context.Context) {
	t := time.NewTicker(d.cfg.Limits.LogInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, s := range d.logLim.due() {
			d.log.Warn().Uint32("peer_uid", s.key.uid).Uint64("suppressed", s.suppressed).Str("reason", s.key.reason).
				Msgf("suppressed %d similar messages in the last %v: %s", s.suppressed, d.cfg.Limits.LogInterval, s.key.reason)
		}
	}
}

// peerCred is what the kernel recorded of a control connection's peer
// when it connected.
type peerCred struct {
	pid      int32
	uid, gid uint32   // effective (SO_PEERCRED)
	groups   []uint32 // supplementary (SO_PEERGROUPS), read only when they matter
}

// peer reads c's peer credentials (false: they could not be read). The
// supplementary groups are read only when they decide the class: with
// --admin-group, for a peer that is not root and whose effective gid is
// not the group. On a kernel without SO_PEERGROUPS only the effective gid
// counts (vnicd warns once).
func (d *Daemon) peer(c *net.UnixConn) (cred peerCred, ok bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return cred, false
	}
	admin := d.cfg.AdminGroup
	raw.Control(func(fd uintptr) {
		uc, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			return
		}
		cred, ok = peerCred{pid: uc.Pid, uid: uc.Uid, gid: uc.Gid}, true
		if admin == nil || uc.Uid == 0 || uc.Gid == *admin {
			return
		}
		cred.groups, err = peerGroups(int(fd))
		switch {
		case errors.Is(err, unix.ENOPROTOOPT):
			d.noPeerGroups.Do(func() {
				d.log.Warn().Uint32("admin_group", *admin).Msg("this kernel cannot tell a peer's supplementary groups (SO_PEERGROUPS, Linux 4.13); only peers whose primary group is --admin-group count as its members")
			})
		case err != nil:
			d.log.Debug().Err(err).Int32("peer_pid", uc.Pid).Msg("could not read the peer's supplementary groups; only its primary group counts")
		}
	})
	return cred, ok
}

func (d *Daemon) serve(conn *proto.Conn, pid int32, st *connState) {
	defer d.conns.Done()
	uid, reserved := st.uid, st.reserved
	log := d.log.With().Int32("peer_pid", pid).Uint32("peer_uid", uid).Logger()
	log.Debug().Msg("control connection")
	lim := d.cfg.Limits
	var mine *tenant
	defer func() {
		conn.Close()
		d.mu.Lock()
		delete(d.open, conn)
		if reserved {
			delete(d.reserve[st.class], conn) // gone already if it made room
		} else {
			d.ordinary--
			if d.byUID[uid]--; d.byUID[uid] <= 0 {
				delete(d.byUID, uid)
			}
		}
		d.mu.Unlock()
		if mine != nil {
			d.detachID(mine.info.ID, "connection closed")
		}
	}()
	// reply sends one message within the reply deadline; a peer that does
	// not take its replies is disconnected (false).
	reply := func(t proto.Type, body any, fds ...int) bool {
		conn.Unix().SetWriteDeadline(time.Now().Add(lim.ReplyTimeout))
		err := conn.Send(t, body, fds...)
		if err == nil {
			return true
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			d.ctl.replyTimeouts.Add(1)
			const msg = "client did not read its reply in time (--reply-timeout); disconnecting it"
			if ev := d.warn(log, uid, msg); ev != nil {
				ev.Dur("reply_timeout", lim.ReplyTimeout).Msg(msg)
			}
		} else {
			log.Debug().Err(err).Msg("reply failed; closing the connection")
		}
		return false
	}
	conn.Unix().SetReadDeadline(time.Now().Add(lim.FirstMessageTimeout))
	for first := true; ; first = false {
		t, body, files, err := conn.Recv()
		for _, f := range files {
			f.Close() // clients send no descriptors
		}
		st.last.Store(d.clock())
		if reserved {
			// A reserved connection serves the operator's commands: it
			// may sit idle no longer than before its first request.
			conn.Unix().SetReadDeadline(time.Now().Add(lim.FirstMessageTimeout))
		} else if first {
			conn.Unix().SetReadDeadline(time.Time{})
		}
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, proto.ErrVersion):
				reply(proto.TError, proto.Error{Message: err.Error(), Version: proto.Version})
				const msg = "client speaks another protocol version"
				if ev := d.warn(log, uid, msg); ev != nil {
					ev.Err(err).Msg(msg)
				}
			case errors.Is(err, proto.ErrTooLarge):
				d.ctl.tooLarge.Add(1)
				reply(proto.TError, proto.Error{Message: fmt.Sprintf("request too large (%v); vnicd accepts requests of at most %d bytes", err, proto.MaxRequest)})
				const msg = "client sent an oversized request; disconnecting it"
				if ev := d.warn(log, uid, msg); ev != nil {
					ev.Err(err).Msg(msg)
				}
			case (first || reserved) && errors.As(err, &ne) && ne.Timeout():
				d.ctl.firstMessageTimeouts.Add(1)
				log.Debug().Dur("timeout", lim.FirstMessageTimeout).Msg("client sent nothing in time (--first-message-timeout); disconnecting it")
			case !errors.Is(err, proto.ErrClosed) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF):
				d.ctl.badRequests.Add(1)
				log.Debug().Err(err).Msg("control connection ended")
			}
			return
		}
		var rerr error
		ok := true
		switch t {
		case proto.TAttach:
			if mine != nil {
				rerr = errors.New("this connection already holds a tenant; open another connection for a second one")
				break
			}
			if reserved {
				rerr = fmt.Errorf("the ordinary control connections are taken (--max-conns-per-uid for uid %d, or --max-conns), and this one is on the reserve of root or --admin-group (--reserved-conns), which serves commands, not tenants; close idle connections first", uid)
				break
			}
			var req proto.Attach
			if rerr = json.Unmarshal(body, &req); rerr != nil {
				rerr = fmt.Errorf("attach request is not valid JSON: %w", rerr)
				break
			}
			mine, rerr = d.attach(conn, req, pid, uid, log, reply)
			if rerr == errReplyFailed {
				return
			}
		case proto.TDetach:
			if mine != nil {
				d.detachID(mine.info.ID, "detach requested")
				mine = nil
			}
			ok = reply(proto.TOK, nil)
		case proto.TTenants:
			var pg proto.Page
			if rerr = decodePage(body, &pg); rerr == nil {
				ok = reply(proto.TTenantsRep, d.tenantsPage(pg))
			}
		case proto.TStats:
			var pg proto.Page
			if rerr = decodePage(body, &pg); rerr == nil {
				ok = reply(proto.TStatsReply, d.statsPage(pg))
			}
		case proto.TStatus:
			ok = reply(proto.TStatusReply, d.status())
		case proto.TConfig:
			ok = reply(proto.TConfigReply, d.config())
		case proto.TDump:
			if mine != nil {
				rerr = errors.New("this connection holds a tenant; dump on another connection")
				break
			}
			d.serveDump(conn, body, pid, uid, log, reply)
			return // the connection ends with the dump
		default:
			rerr = fmt.Errorf("unknown request type %d", t)
		}
		if rerr != nil {
			if t != proto.TAttach {
				d.ctl.badRequests.Add(1)
			}
			ok = reply(proto.TError, proto.Error{Message: rerr.Error()})
		}
		if !ok {
			return
		}
	}
}

// errReplyFailed: the attach reply could not be sent (the tenant was
// detached again); the connection is closed.
var errReplyFailed = errors.New("attach reply failed")

func decodePage(body []byte, pg *proto.Page) error {
	if len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, pg); err != nil {
		return fmt.Errorf("page request is not valid JSON: %w", err)
	}
	return nil
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

// maxRingEntries and maxCount bound the sizes an attach may ask for before
// any arithmetic or conversion to the region's uint32 fields.
const maxRingEntries = 1 << 24

func (d *Daemon) attach(conn *proto.Conn, req proto.Attach, pid int32, uid uint32, log zerolog.Logger, reply func(proto.Type, any, ...int) bool) (*tenant, error) {
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
	var hostKey rss.Key
	var hostMAC [6]byte
	if req.Host != nil {
		if hostKey, hostMAC, err = hostMatch(req.Host, &match); err != nil {
			d.ctl.refusedClaim.Add(1)
			return nil, err
		}
	} else if d.cfg.RequireHost {
		d.ctl.refusedClaim.Add(1)
		return nil, fmt.Errorf("vnicd emulates a network (--source fabric): say which host this tenant is, with its IPv4 address (client.AttachOptions.Host), e.g. 198.18.0.1")
	}
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
	geo := shm.Queues(req.Queues, ax, bxs, txs, d.cfg.BufSize, bufs)
	geo.Model = uint32(d.eng.Config().Model)
	if err := geo.Validate(); err != nil {
		d.ctl.refusedGeometry.Add(1)
		return nil, err
	}
	for _, a := range geo.SizingAdvice() {
		const msg = "tenant's geometry could be better"
		if ev := d.warn(log, uid, msg); ev != nil {
			ev.Str("name", req.Name).Str("advice", a).Msg("tenant's geometry: " + a)
		}
	}
	size := int64(geo.Layout().Total)
	noHuge := d.cfg.NoHugePages || !lim.HugePages
	if !noHuge {
		size = (size + 2<<20 - 1) &^ (2<<20 - 1) // a huge-page region rounds up to 2 MiB
	}
	if size > lim.MaxRegionBytes {
		d.ctl.refusedRegion.Add(1)
		return nil, fmt.Errorf("this geometry needs a region of %d MiB, more than the per-tenant limit of %d MiB (--max-region); ask for fewer queues, smaller rings or fewer buffers", size>>20, lim.MaxRegionBytes>>20)
	}
	d.mu.Lock()
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
	var refuse error
	switch {
	case len(d.live) >= d.cfg.MaxTenants:
		d.ctl.refusedTenants.Add(1)
		refuse = fmt.Errorf("vnicd already serves %d tenants, its limit (--max-tenants)", d.cfg.MaxTenants)
	case lim.MaxTenantsPerUID > 0 && perUID >= lim.MaxTenantsPerUID:
		d.ctl.refusedTenantsUID.Add(1)
		refuse = fmt.Errorf("uid %d already has %d tenants attached, the per-uid limit (--max-tenants-per-uid); detach one or raise the flag", uid, perUID)
	case holder != nil:
		d.ctl.refusedName.Add(1)
		refuse = fmt.Errorf("tenant name %q is taken by tenant %d (pid %d); pick another name", req.Name, holder.info.ID, holder.info.PID)
	case d.shmem+size > lim.MemoryBudget:
		d.ctl.refusedBudget.Add(1)
		refuse = fmt.Errorf("this tenant's region of %d MiB would take vnicd's tenant memory to %d MiB, over its budget of %d MiB (--memory-budget); ask for a smaller geometry, or detach tenants", size>>20, (d.shmem+size)>>20, lim.MemoryBudget>>20)
	}
	if refuse == nil && match.Specific() {
		if t := d.claimHolder(match); t != nil {
			d.ctl.refusedClaim.Add(1)
			refuse = fmt.Errorf("match rule %s overlaps the rule %s of tenant %d %q (pid %d); claims may not overlap: pick ports or addresses that tenant does not claim", fmtMatch(req.Match), fmtMatch(t.info.Match), t.info.ID, t.info.Name, t.info.PID)
		}
	}
	if refuse != nil {
		d.mu.Unlock()
		return nil, refuse
	}
	id := d.nextID
	d.nextID++
	d.shmem += size // reserved now; released by detach (or below on failure)
	// Hold the name and the claim while the region is built: a placeholder
	// in live (nt nil) keeps concurrent attaches from taking them.
	ph := &tenant{info: proto.TenantInfo{ID: id, Name: req.Name, PID: pid, UID: uid, Queues: req.Queues, Match: req.Match, Host: req.Host}, match: match, size: size}
	d.live[id] = ph
	d.mu.Unlock()
	fail := func(err error) (*tenant, error) {
		d.mu.Lock()
		delete(d.live, id)
		d.shmem -= size
		d.mu.Unlock()
		return nil, err
	}
	geo.Tenant = uint32(id)
	region, err := shm.Create(geo, shm.Options{Name: fmt.Sprintf("vnic-tenant-%d", id), NoHuge: noHuge,
		Log: func(msg string, err error) { d.log.Info().Err(err).Msg(msg) }})
	if err != nil {
		return fail(fmt.Errorf("create the region: %w", err))
	}
	wake, theirs, err := doorbells(req.Queues)
	if err != nil {
		region.Close()
		return fail(err)
	}
	defer closeFDs(theirs) // sent to the tenant (or not): vnicd keeps only its copies
	nt, err := d.eng.AddTenant(nic.TenantConfig{ID: id, Name: req.Name, Match: match, RETASize: d.cfg.RETASize,
		Wake: wake, Key: hostKey, MAC: hostMAC}, region)
	if err == nil && d.cfg.Hooks != nil {
		if err = d.cfg.Hooks.Attach(d.eng, nt); err != nil {
			d.eng.RemoveTenant(nt)
		}
	}
	if err != nil {
		closeFDs(wake)
		region.Close()
		return fail(err)
	}
	var ledger func() map[string]uint64
	if d.cfg.HostLedger != nil {
		ledger = d.cfg.HostLedger(nt)
	}
	t := &tenant{region: region, nt: nt, wake: wake, conn: conn, match: match, size: size, ledger: ledger, info: proto.TenantInfo{
		ID: id, Name: req.Name, PID: pid, UID: uid, Queues: req.Queues, Match: req.Match, Host: req.Host, Attached: time.Now().UTC().Format(time.RFC3339)}}
	d.mu.Lock()
	d.live[id] = t
	d.mu.Unlock()
	reta := make([]uint16, nt.RETA().Size())
	for i := range reta {
		reta[i] = uint16(nt.RETA().Entry(i))
	}
	fds := append([]int{region.FD()}, theirs...)
	// The reply echoes what the region holds (its header is what the
	// client maps), not what was asked.
	g := region.Geo
	rep := proto.AttachReply{Tenant: id, Model: d.eng.Config().Model.String(), FDs: len(fds),
		Geometry: proto.Geometry{NumQueues: int(g.NumBx), AxSize: int(g.AxSize), BxSize: int(g.BxSize), TxSize: int(g.TxSize), BufSize: int(g.BufSize), Buffers: int(g.BufCount), Model: int(g.Model)},
		RSS:      proto.RSS{Profile: "toeplitz", Key: hex.EncodeToString(nt.Key()), RETA: reta}}
	if ec := d.eng.Config(); ec.Idle == nic.IdleAdaptive {
		rep.RxCoalesceUs = int(ec.RxCoalesce / time.Microsecond)
	}
	if !reply(proto.TAttachReply, rep, fds...) {
		d.detachID(id, "reply failed")
		return nil, errReplyFailed
	}
	log.Info().Int("tenant", id).Str("name", req.Name).Int("queues", req.Queues).Int("buffers", bufs).Int64("region_bytes", size).
		Bool("huge_pages", region.Huge).Interface("match", req.Match).Msg("tenant attached")
	return t, nil
}

// claimHolder returns the live tenant whose rule overlaps m (under mu).
// There is no priority between tenants: overlapping claims are refused.
func (d *Daemon) claimHolder(m nic.Match) *tenant {
	r := rule{proto: m.Proto, lo: m.DstPortLo, hi: m.DstPortHi, dst: m.Dst}
	for _, id := range d.liveIDs() {
		t := d.live[id]
		if t.match.Default && !t.match.Specific() {
			continue
		}
		if overlap(r, rule{proto: t.match.Proto, lo: t.match.DstPortLo, hi: t.match.DstPortHi, dst: t.match.Dst}) {
			return t
		}
	}
	return nil
}

func fmtMatch(m proto.Match) string {
	var parts []string
	if m.Proto != "" {
		parts = append(parts, m.Proto)
	}
	if m.DstPortLo != 0 || m.DstPortHi != 0 {
		hi := m.DstPortHi
		if hi == 0 {
			hi = m.DstPortLo
		}
		parts = append(parts, fmt.Sprintf("port %d-%d", m.DstPortLo, hi))
	}
	if m.Dst != "" {
		parts = append(parts, "dst "+m.Dst)
	}
	if m.Default {
		parts = append(parts, "default")
	}
	if len(parts) == 0 {
		return "{any}"
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// detachID removes a tenant from the engine, records its counters in the
// history and releases its region.
func (d *Daemon) detachID(id int, why string) {
	d.mu.Lock()
	t, ok := d.live[id]
	if ok && t.nt != nil {
		delete(d.live, id)
	}
	d.mu.Unlock()
	if !ok || t.nt == nil {
		return
	}
	if d.cfg.Hooks != nil {
		d.cfg.Hooks.Detach(d.eng, t.nt)
	}
	d.eng.RemoveTenant(t.nt)
	d.endTenantDump(t)
	st := tenantStats(t)
	st.Detached = time.Now().UTC().Format(time.RFC3339)
	if e := t.nt.Faulty(); e != nil {
		st.Faulty = e.Error()
	}
	closeFDs(t.wake)
	t.region.Close()
	d.mu.Lock()
	d.shmem -= t.size
	d.histSeq++
	d.hist = append(d.hist, st)
	d.histSeqs = append(d.histSeqs, d.histSeq)
	d.histLedgers = append(d.histLedgers, t.ledger)
	if n := len(d.hist) - d.cfg.HistorySize; n > 0 {
		d.hist = append(d.hist[:0:0], d.hist[n:]...)
		d.histSeqs = append(d.histSeqs[:0:0], d.histSeqs[n:]...)
		d.histLedgers = append(d.histLedgers[:0:0], d.histLedgers[n:]...)
	}
	d.mu.Unlock()
	if why != "connection closed" && why != "detach requested" {
		t.conn.Close() // a faulty tenant is disconnected
	}
	d.log.Info().Int("tenant", id).Str("name", t.info.Name).Str("why", why).Msg("tenant detached; counters kept in history")
}

func tenantStats(t *tenant) proto.TenantStats {
	st := proto.TenantStats{TenantInfo: t.info}
	if t.ledger != nil {
		st.Fabric = t.ledger()
	}
	for q := 0; q < int(t.region.Geo.NumBx); q++ {
		g := t.region.Geo
		rs := proto.RingStats{Queue: q, Node: t.nt.Node(q), Assoc: append([]int(nil), t.nt.Assoc(q)...),
			AxSize: int(g.AxSize), BxSize: int(g.BxSize), BufSize: int(g.BufSize),
			NIC:    t.region.Counters(shm.NICBlock, q).Snapshot().Map(),
			Client: t.region.Counters(shm.ClientBlock, q).Snapshot().Map()}
		if p, c, ok := ring.Cursors(t.region.AxMem(q)); ok {
			rs.AxFill = int(min(p-c, uint64(t.region.Geo.AxSize))) // untrusted: clamp
		}
		st.Rings = append(st.Rings, rs)
	}
	return st
}

// Stats returns every counter (all pages).
func (d *Daemon) Stats() proto.Stats {
	s := proto.Stats{Global: d.eng.Global().Snapshot().Map(), Control: d.controlSnapshot()}
	if d.cfg.Hooks != nil {
		s.Source = d.cfg.Hooks.Stats()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.sorted() {
		s.Tenants = append(s.Tenants, tenantStats(t))
	}
	for i := range d.hist {
		s.History = append(s.History, d.histStats(i))
	}
	return s
}

// histStats is history entry i, its ledger read now. Under mu.
func (d *Daemon) histStats(i int) proto.TenantStats {
	st := d.hist[i]
	if l := d.histLedgers[i]; l != nil {
		st.Fabric = l()
	}
	return st
}

// liveIDs returns the ids in live, ascending (placeholders of attaches in
// progress included), under mu.
func (d *Daemon) liveIDs() []int {
	ids := make([]int, 0, len(d.live))
	for id := range d.live {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}

// sorted returns the attached tenants by id, under mu.
func (d *Daemon) sorted() []*tenant {
	out := make([]*tenant, 0, len(d.live))
	for _, id := range d.liveIDs() {
		if t := d.live[id]; t.nt != nil {
			out = append(out, t)
		}
	}
	return out
}

// paginate fills one page: live tenants with id > pg.Live (unless pg.Done),
// then history entries with sequence > pg.Hist, adding items (each encoded
// once) while the page stays under proto.PageBytes (at least one item per
// page). It returns the next page's request, nil when everything fit.
// Under mu.
func (d *Daemon) paginate(pg proto.Page, live func(*tenant) any, hist func(int) any) (lv, hs []json.RawMessage, next *proto.Page) {
	budget := proto.PageBytes - 4096 // room for the page's other fields
	used := 0
	fits := func(item any) (json.RawMessage, bool) {
		b, _ := json.Marshal(item)
		if used > 0 && used+len(b) > budget {
			return nil, false
		}
		used += len(b) + 1
		return b, true
	}
	if !pg.Done {
		for _, t := range d.sorted() {
			if t.info.ID <= pg.Live {
				continue
			}
			b, ok := fits(live(t))
			if !ok {
				return lv, hs, &proto.Page{Live: t.info.ID - 1}
			}
			lv = append(lv, b)
		}
	}
	for i, seq := range d.histSeqs {
		if seq <= pg.Hist {
			continue
		}
		b, ok := fits(hist(i))
		if !ok {
			return lv, hs, &proto.Page{Done: true, Hist: seq - 1}
		}
		hs = append(hs, b)
	}
	return lv, hs, nil
}

// statsWire is proto.Stats with its tenants already encoded.
type statsWire struct {
	Global  map[string]uint64 `json:"global"`
	Source  map[string]uint64 `json:"source,omitempty"`
	Tenants []json.RawMessage `json:"tenants"`
	History []json.RawMessage `json:"history"`
	Control map[string]uint64 `json:"control,omitempty"`
	Next    *proto.Page       `json:"next,omitempty"`
}

// statsPage answers one TStats page.
func (d *Daemon) statsPage(pg proto.Page) statsWire {
	s := statsWire{Global: d.eng.Global().Snapshot().Map(), Control: d.controlSnapshot()}
	if d.cfg.Hooks != nil {
		s.Source = d.cfg.Hooks.Stats()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s.Tenants, s.History, s.Next = d.paginate(pg,
		func(t *tenant) any { return tenantStats(t) },
		func(i int) any { return d.histStats(i) })
	return s
}

func liveInfo(t *tenant) proto.TenantInfo {
	info := t.info
	if e := t.nt.Faulty(); e != nil {
		info.Faulty = e.Error()
	}
	return info
}

// tenantsWire is proto.Tenants with its entries already encoded.
type tenantsWire struct {
	Tenants []json.RawMessage `json:"tenants"`
	History []json.RawMessage `json:"history"`
	Next    *proto.Page       `json:"next,omitempty"`
}

// tenantsPage answers one TTenants page.
func (d *Daemon) tenantsPage(pg proto.Page) tenantsWire {
	d.mu.Lock()
	defer d.mu.Unlock()
	var r tenantsWire
	r.Tenants, r.History, r.Next = d.paginate(pg,
		func(t *tenant) any { return liveInfo(t) },
		func(i int) any { return d.hist[i].TenantInfo })
	return r
}

func (d *Daemon) status() proto.Status {
	d.mu.Lock()
	n := len(d.sorted())
	d.mu.Unlock()
	ec, is := d.eng.Config(), d.eng.IdleStats()
	st := proto.Status{Version: d.cfg.Version, PID: os.Getpid(), Uptime: time.Since(d.start).Round(time.Second).String(),
		Model: ec.Model.String(), Policy: ec.Policy.String(), Source: d.cfg.SourceName, Mode: d.cfg.SourceMode,
		Tenants: n, Emulator: ec.EmulatorCPU, Socket: d.cfg.Socket, Metrics: d.cfg.MetricsAddr,
		Idle: ec.Idle.String(), SpinBudget: spinBudget(ec).String(), Sleeps: is.Sleeps, Signals: is.Signals, SlowSignals: is.Slow}
	st.EmulatorPriority = "normal"
	if ec.EmulatorIdlePriority {
		st.EmulatorPriority = "idle"
	}
	st.Dumps, st.DumpDrops = d.dumpLive()
	if ec.Idle == nic.IdleAdaptive && ec.RxCoalesce > 0 {
		st.RxCoalesce, st.Naps, st.Urgent = ec.RxCoalesce.String(), is.Naps, is.Urgent
		if ec.RxCoalesceMax > ec.RxCoalesce {
			st.RxCoalesceMax, st.Nap = ec.RxCoalesceMax.String(), is.Nap.String()
		}
	}
	return st
}

func (d *Daemon) config() proto.Config {
	ec, l := d.eng.Config(), d.cfg.Limits
	adminGroup := "" // none
	if g := d.cfg.AdminGroup; g != nil {
		adminGroup = fmt.Sprint(*g)
	}
	return proto.Config{
		"model": ec.Model.String(), "policy": ec.Policy.String(), "key": hex.EncodeToString(ec.Key),
		"emulator_cpu": fmt.Sprint(ec.EmulatorCPU), "idle": ec.Idle.String(), "spin_budget": spinBudget(ec).String(), "bx_post_batch": fmt.Sprint(ec.PostBatch), "ax_size": fmt.Sprint(d.cfg.AxSize), "bx_size": fmt.Sprint(d.cfg.BxSize),
		"tx_size": fmt.Sprint(d.cfg.TxSize), "buf_size": fmt.Sprint(d.cfg.BufSize), "reta_size": fmt.Sprint(d.cfg.RETASize),
		"max_queues": fmt.Sprint(d.cfg.MaxQueues), "max_tenants": fmt.Sprint(d.cfg.MaxTenants), "socket": d.cfg.Socket,
		"source": d.cfg.SourceName, "source_mode": d.cfg.SourceMode, "metrics_addr": d.cfg.MetricsAddr,
		"max_conns": fmt.Sprint(l.MaxConns), "max_conns_per_uid": fmt.Sprint(l.MaxConnsPerUID),
		"max_tenants_per_uid": fmt.Sprint(l.MaxTenantsPerUID), "first_message_timeout": l.FirstMessageTimeout.String(),
		"reply_timeout": l.ReplyTimeout.String(), "max_region": fmt.Sprint(l.MaxRegionBytes),
		"memory_budget": fmt.Sprint(l.MemoryBudget), "max_name": fmt.Sprint(l.MaxName), "tenant_huge_pages": fmt.Sprint(l.HugePages && !d.cfg.NoHugePages),
		"max_dumps": fmt.Sprint(l.MaxDumps), "dump_buffer": fmt.Sprint(l.DumpBufferBytes),
		"pause_max": ec.PauseMax.String(), "reserved_conns": fmt.Sprint(max(l.ReservedConns, 0)), "admin_group": adminGroup,
		"log_burst": fmt.Sprint(l.LogBurst), "log_interval": l.LogInterval.String(),
	}
}

// doorbells makes one eventfd per queue, the queue's TX doorbell: vnicd
// keeps one descriptor (the engine watches it, edge-triggered, and never
// reads nor writes it) and sends the tenant a second one of the same
// eventfd. Signals the other way go through the region's futex words (see
// package shm, the wake section), so vnicd never signals a kernel object
// the tenant can hang waiters on, and nothing it receives from the tenant
// can carry a descriptor: an eventfd is not a socket.
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

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// spinBudget is the engine's effective spin budget.
func spinBudget(ec nic.Config) time.Duration {
	if ec.SpinBudget > 0 {
		return ec.SpinBudget
	}
	return nic.DefaultSpinBudget
}
