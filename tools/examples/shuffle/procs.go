package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"syscall"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/tools/examples/internal/casestudy"
)

// With -procs per-host every host runs in a process of its own: this
// binary again, with hostEnv holding its hostSpec. The host listens and
// says where; once the parent has sent every host's address it connects
// and says so; then, for each shuffle, it generates its table (GenTable:
// the same rows the parent's would hold) and faults in its gather
// buffers (NewOutput), shuffles it when told and reports its tallies and
// CPU time, until its stdin closes.

// hostEnv holds, in a host's own process, its hostSpec as JSON.
const hostEnv = "VNIC_SHUFFLE_HOST"

// hostSpec is what a host's process is built from.
type hostSpec struct {
	ID, Hosts, Workers int
	Seed               uint32
	MaxMsg             int
	Transport          string // bi or tcp
	Fast               bichannel.FastMode
	IP                 netip.Addr
	VNIC               transport.VNICConfig
	Testbed            string // else loopback
	Bi                 biParams
	Timeout            time.Duration
}

// biParams are the bi-channel settings a shuffle sets (bichannel.Config
// holds functions, which do not travel).
type biParams struct {
	Flows, BuffersPerFlow, Window                 int
	RetransmitTimeout, AckDelay, HeartbeatTimeout time.Duration
	Preallocate                                   bool
}

func (b biParams) config() bichannel.Config {
	return bichannel.Config{Flows: b.Flows, BuffersPerFlow: b.BuffersPerFlow, Window: b.Window, RetransmitTimeout: b.RetransmitTimeout,
		AckDelay: b.AckDelay, HeartbeatTimeout: b.HeartbeatTimeout, Preallocate: b.Preallocate}
}

func paramsOf(c bichannel.Config) biParams {
	return biParams{Flows: c.Flows, BuffersPerFlow: c.BuffersPerFlow, Window: c.Window, RetransmitTimeout: c.RetransmitTimeout,
		AckDelay: c.AckDelay, HeartbeatTimeout: c.HeartbeatTimeout, Preallocate: c.Preallocate}
}

// toHost is a message to a host's process: the hosts' addresses first,
// then requests.
type toHost struct {
	Addrs []string
	Op    string // "table" (GenTable of Rows rows and Seed), "run" or "stats"
	Rows  int
	Seed  uint64
}

// fromHost is a host process's answer.
type fromHost struct {
	Err             string
	Addr            string
	Tally           *hostTally
	UserCPU, SysCPU time.Duration // the run's, from getrusage
	Stats           *bichannel.Stats
}

// hostMain is a host in a process of its own.
func hostMain(js string) int {
	return casestudy.MemberMain("shuffle host", hostEnv, js, func(s *hostSpec) (int, time.Duration) { return s.ID, s.Timeout }, serveHost)
}

func serveHost(s hostSpec, p *casestudy.Parent) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	_, places, err := casestudy.MemberPlaces(s.Testbed, s.ID, s.Hosts, s.IP, s.VNIC)
	if err != nil {
		return err
	}
	var (
		mn    *casestudy.MemberNet
		tr    Transport
		hello fromHost
	)
	defer func() {
		if tr != nil {
			tr.Close()
		} else if mn != nil {
			mn.Close()
		}
	}()
	var bi *bichannel.Config
	switch s.Transport {
	case "bi":
		tmpl := s.Bi.config()
		tmpl.MaxPayload = s.MaxMsg
		bi = &tmpl
	case "tcp":
	default:
		return fmt.Errorf("transport %q: give bi or tcp", s.Transport)
	}
	if mn, err = casestudy.ListenMember(places, s.ID, s.Workers, bi, s.Fast); err != nil {
		return err
	}
	hello.Addr = mn.Addr()
	if err := p.Send(hello); err != nil {
		return err
	}
	var m toHost
	if err := p.Recv(&m); err != nil {
		return fmt.Errorf("reading the hosts' addresses: %w", err)
	}
	if len(m.Addrs) != s.Hosts {
		return fmt.Errorf("got %d hosts' addresses, want %d", len(m.Addrs), s.Hosts)
	}
	mesh, err := mn.Connect(ctx, s.ID, s.Workers, m.Addrs, nil)
	if err != nil {
		return err
	}
	if mn.EP != nil {
		tr = BiTransport{E: mn.EP, Max: s.MaxMsg}
	} else {
		tr = NewTCPTransport(mesh, s.Workers, s.MaxMsg)
	}
	if err := p.Send(fromHost{}); err != nil {
		return err
	}
	var (
		table *Table
		out   *Output
	)
	hc := HostConfig{ID: s.ID, Hosts: s.Hosts, Workers: s.Workers, Seed: s.Seed}
	for {
		var m toHost
		if err := p.Recv(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading a request: %w", err)
		}
		var a fromHost
		switch m.Op {
		case "table":
			table = GenTable(s.ID, m.Rows, m.Seed)
			if out == nil || table.Rows() > out.rows {
				out = NewOutput(hc, table.Rows())
			}
		case "run":
			if table == nil {
				a.Err = fmt.Sprintf("host %d: told to run before it had a table", s.ID)
				break
			}
			u0, s0 := rusage()
			c := hc
			c.Output = out
			hr, err := RunHost(ctx, c, table, tr)
			u1, s1 := rusage()
			a.UserCPU, a.SysCPU = u1-u0, s1-s0
			if err != nil {
				a.Err = fmt.Sprintf("host %d: %v", s.ID, err)
				break
			}
			t := tallyOf(hr)
			a.Tally = &t
		case "stats":
			if b, ok := tr.(BiTransport); ok {
				st := b.E.Stats()
				a.Stats = &st
			}
		default:
			a.Err = fmt.Sprintf("host %d: unknown request %q", s.ID, m.Op)
		}
		if err := p.Send(a); err != nil {
			return err
		}
	}
}

// rusage is this process's user and system time.
func rusage() (user, sys time.Duration) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(syscall.TimevalToNsec(ru.Utime)), time.Duration(syscall.TimevalToNsec(ru.Stime))
}

// procCluster is a shuffle cluster whose hosts run each in a process of
// their own.
type procCluster struct {
	hosts casestudy.Children
	life  time.Duration
}

// procTimeout bounds a host process's answers but a shuffle's.
const procTimeout = 30 * time.Second

// startProcs starts a host process per place, pinned to cpus (nil:
// unpinned), and connects them.
func startProcs(cfg ClusterConfig, testbed string, cpus []int, life time.Duration) (_ *procCluster, err error) {
	n := len(cfg.Places)
	if cfg.FastPath != nil {
		return nil, errors.New("shuffle: -procs per-host cannot carry an in-process fast path to the hosts")
	}
	pc := &procCluster{hosts: make(casestudy.Children, 0, n), life: life}
	defer func() {
		if err != nil {
			pc.hosts.Kill()
		}
	}()
	for i, pl := range cfg.Places {
		s := hostSpec{ID: i, Hosts: n, Workers: cfg.Workers, Seed: cfg.Seed, MaxMsg: cfg.MaxMsg, Transport: cfg.Transport, Fast: cfg.Fast,
			IP: pl.IP, VNIC: pl.VNIC, Testbed: testbed, Bi: paramsOf(cfg.Bi), Timeout: life}
		c, err := casestudy.StartChild(fmt.Sprintf("shuffle host %d", i), hostEnv, s, cpus)
		if err != nil {
			return nil, err
		}
		pc.hosts = append(pc.hosts, c)
	}
	addrs := make([]string, n)
	for i, c := range pc.hosts {
		var h fromHost
		if err := c.Recv(&h, procTimeout); err != nil {
			return nil, fmt.Errorf("shuffle: %w", err)
		}
		addrs[i] = h.Addr
	}
	if err := pc.all(toHost{Addrs: addrs}, procTimeout, nil); err != nil {
		return nil, err
	}
	return pc, nil
}

// all sends m to every host and reads their answers, each into got (if
// set) by host.
func (pc *procCluster) all(m toHost, timeout time.Duration, got []fromHost) error {
	for _, c := range pc.hosts {
		if err := c.Send(m); err != nil {
			return fmt.Errorf("shuffle: %w", err)
		}
	}
	var errs []error
	for i, c := range pc.hosts {
		var a fromHost
		if err := c.Recv(&a, timeout); err != nil {
			return fmt.Errorf("shuffle: %w", err)
		}
		if a.Err != "" {
			errs = append(errs, errors.New("shuffle: "+a.Err))
		}
		if got != nil {
			got[i] = a
		}
	}
	return errors.Join(errs...)
}

// Run has host i shuffle GenTable(i, rows, seed) and checks exactly-once
// delivery across the cluster, as Cluster.Run. The CPU time is the host
// processes' alone.
func (pc *procCluster) Run(rows int, seed uint64) (*Result, error) {
	if err := pc.all(toHost{Op: "table", Rows: rows, Seed: seed}, procTimeout, nil); err != nil {
		return nil, err
	}
	N := len(pc.hosts)
	answers := make([]fromHost, N)
	start := time.Now()
	err := pc.all(toHost{Op: "run"}, pc.life, answers)
	res := &Result{Elapsed: time.Since(start), Rows: uint64(rows * N)}
	if err != nil {
		return res, err
	}
	hs := make([]hostTally, N)
	for i, a := range answers {
		if a.Tally == nil {
			return res, fmt.Errorf("shuffle: host %d reported no result", i)
		}
		hs[i] = *a.Tally
		res.UserCPU += a.UserCPU
		res.SystemCPU += a.SysCPU
		res.Hosts = append(res.Hosts, &HostResult{SentTo: a.Tally.SentTo, Gathered: a.Tally.Gathered, NetBytes: a.Tally.NetBytes, Messages: a.Tally.Messages})
	}
	res.CPU = res.UserCPU + res.SystemCPU
	return res, res.check(hs)
}

// Stats is the bi-channel counters of every host, summed (zero on
// kernel TCP).
func (pc *procCluster) Stats() (bichannel.Stats, error) {
	var st bichannel.Stats
	answers := make([]fromHost, len(pc.hosts))
	if err := pc.all(toHost{Op: "stats"}, procTimeout, answers); err != nil {
		return st, err
	}
	for _, a := range answers {
		if a.Stats != nil {
			addStats(&st, *a.Stats)
		}
	}
	return st, nil
}

// Close ends every host's process.
func (pc *procCluster) Close() error {
	var errs []error
	for _, c := range pc.hosts {
		errs = append(errs, c.Close(10*time.Second))
	}
	return errors.Join(errs...)
}
