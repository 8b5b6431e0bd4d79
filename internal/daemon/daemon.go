//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/internal/pages"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/nic"
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
	// reports its counters; it may also require hosts, keep their
	// ledgers and describe its metrics (see Hooks).
	Hooks Hooks
	// Offloads is what the NIC does for tenants' frames, told to each in
	// its attach reply.
	Offloads proto.Offloads
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
	// OnTenants, if set, is told the number of tenants (attaches in
	// progress included) after each attach and detach, in order, under
	// the daemon's lock: vnicd sizes GOMAXPROCS from it.
	OnTenants func(n int)
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
	// a detached host's ledger may still change (HostLedgerer), so it is
	// read again for each report.
	histLedgers []func() map[string]uint64
	// What the Hooks' optional interfaces say (hooks.go), asked in New:
	// tenants must name their host; the host ledgers (nil: none).
	requireHost bool
	ledgers     HostLedgerer
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
	irq    []int // the write ends of the queues' interrupt pipes (nil: none asked)
	conn   *proto.Conn
	match  nic.Match
	size   int64                    // region bytes counted against the memory budget
	dump   *dumpSession             // the running dump of this tenant, under mu
	ledger func() map[string]uint64 // HostLedgerer's; nil: none
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
	if r, ok := cfg.Hooks.(HostRequirer); ok {
		d.requireHost = r.RequireHost()
	}
	d.ledgers, _ = cfg.Hooks.(HostLedgerer)
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

// spinBudget is the engine's effective spin budget.
func spinBudget(ec nic.Config) time.Duration {
	if ec.SpinBudget > 0 {
		return ec.SpinBudget
	}
	return nic.DefaultSpinBudget
}
