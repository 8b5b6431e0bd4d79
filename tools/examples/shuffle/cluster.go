package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/vnic/vnic/tools/examples/internal/casestudy"
)

// Place is where one host's sockets live (and its vnicd).
type Place = casestudy.Place

// ClusterConfig describes an in-process cluster: every host of the
// shuffle in this process, each with its own sockets (and namespace, if
// the Place says so).
type ClusterConfig struct {
	// ClusterConfig is the hosts' places and network; Transport is "bi"
	// or "tcp".
	casestudy.ClusterConfig
	Workers int
	Seed    uint32
	// MaxMsg is the largest message on either transport (0: 1400 bytes,
	// one Ethernet MTU); above 1472 the testbed needs a larger MTU.
	MaxMsg int
}

// Cluster is the connected transports of every host.
type Cluster struct {
	cfg ClusterConfig
	trs []Transport
}

// NewCluster connects every host to every other over cfg.Transport.
func NewCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	N := len(cfg.Places)
	cl := &Cluster{cfg: cfg, trs: make([]Transport, N)}
	switch cfg.Transport {
	case "tcp":
		ms, err := casestudy.Meshes(ctx, cfg.Places, cfg.Workers, nil)
		if err != nil {
			return nil, fmt.Errorf("shuffle: %w", err)
		}
		for i, m := range ms {
			cl.trs[i] = NewTCPTransport(m, cfg.Workers, cfg.MaxMsg)
		}
	case "bi":
		tmpl := cfg.Bi
		tmpl.MaxPayload = cfg.MaxMsg
		eps, err := casestudy.Endpoints(ctx, casestudy.EndpointsConfig{Places: cfg.Places, Workers: cfg.Workers,
			Template: tmpl, Fast: cfg.Fast, FastPath: cfg.FastPath})
		if err != nil {
			return nil, fmt.Errorf("shuffle: %w", err)
		}
		for i, e := range eps {
			cl.trs[i] = BiTransport{E: e, Max: cfg.MaxMsg}
		}
	default:
		return nil, fmt.Errorf("shuffle: transport %q: give bi or tcp", cfg.Transport)
	}
	return cl, nil
}

// Transports returns the hosts' transports.
func (cl *Cluster) Transports() []Transport { return cl.trs }

// Close closes every transport.
func (cl *Cluster) Close() error {
	var errs []error
	for _, t := range cl.trs {
		if t != nil {
			errs = append(errs, t.Close())
		}
	}
	return errors.Join(errs...)
}

// Result is one shuffle of the whole cluster.
type Result struct {
	Hosts        []*HostResult
	Rows         uint64        // rows of all tables
	NetBytes     uint64        // tuple bytes that crossed the network
	Elapsed      time.Duration // wall time of the shuffle
	CPU          time.Duration // user+system CPU time of this process during it (every host)
	UserCPU      time.Duration
	SystemCPU    time.Duration
	ExactlyOnce  bool   // every host gathered exactly the rows the tables hold for it
	CheckMessage string // what the check compared
}

// GBps is the network throughput in GB/s (10^9 bytes).
func (r *Result) GBps() float64 { return float64(r.NetBytes) / r.Elapsed.Seconds() / 1e9 }

// CPUPerGB is CPU-seconds per GB sent over the network.
func (r *Result) CPUPerGB() float64 { return r.CPU.Seconds() / (float64(r.NetBytes) / 1e9) }

func (cl *Cluster) hostConfig(i int) HostConfig {
	return HostConfig{ID: i, Hosts: len(cl.trs), Workers: cl.cfg.Workers, Seed: cl.cfg.Seed}
}

// Run shuffles tables[i] (host i's) and checks exactly-once delivery
// across the cluster: for every host h, the rows gathered on h equal, in
// count and checksum, the sum over all hosts of the rows their tables
// hold for h.
func (cl *Cluster) Run(ctx context.Context, tables []*Table) (*Result, error) {
	N := len(cl.trs)
	res := &Result{Hosts: make([]*HostResult, N)}
	errs := make([]error, N)
	outs := make([]*Output, N)
	for i := range N {
		outs[i] = NewOutput(cl.hostConfig(i), tables[i].Rows())
	}
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range N {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cl.hostConfig(i)
			c.Output = outs[i]
			res.Hosts[i], errs[i] = RunHost(ctx, c, tables[i], cl.trs[i])
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	res.UserCPU = time.Duration(syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime))
	res.SystemCPU = time.Duration(syscall.TimevalToNsec(ru1.Stime) - syscall.TimevalToNsec(ru0.Stime))
	res.CPU = res.UserCPU + res.SystemCPU
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	hs := make([]hostTally, N)
	for i, h := range res.Hosts {
		hs[i] = tallyOf(h)
	}
	for _, t := range tables {
		res.Rows += uint64(t.Rows())
	}
	return res, res.check(hs)
}

// hostTally is what the exactly-once check needs of a host's result.
type hostTally struct {
	SentTo             []Tally
	Gathered           Tally
	NetBytes, Messages uint64
	OutRows            uint64 // rows in its output, its own and gathered
}

func tallyOf(h *HostResult) hostTally {
	t := hostTally{SentTo: h.SentTo, Gathered: h.Gathered, NetBytes: h.NetBytes, Messages: h.Messages}
	for w := range h.Out {
		t.OutRows += uint64(len(h.Out[w])+len(h.Local[w])) / TupleLen
	}
	return t
}

// check fills res.NetBytes and checks exactly-once delivery across the
// hosts: for every host h, the rows gathered on h equal, in count and
// checksum, the sum over all hosts of the rows their tables hold for h.
func (res *Result) check(hs []hostTally) error {
	N := len(hs)
	res.ExactlyOnce = true
	for h := range N {
		var want Tally
		for s := range N {
			want.Merge(hs[s].SentTo[h])
		}
		got, inOut := hs[h].Gathered, hs[h].OutRows
		if got != want || inOut != want.Rows {
			res.ExactlyOnce = false
			res.CheckMessage += fmt.Sprintf("host %d gathered %d rows (%d in its output, checksum %#x), the tables hold %d (%#x) for it; ",
				h, got.Rows, inOut, got.Sum, want.Rows, want.Sum)
		}
	}
	for _, h := range hs {
		res.NetBytes += h.NetBytes
	}
	if !res.ExactlyOnce {
		return errors.New("shuffle: exactly-once check failed: " + res.CheckMessage)
	}
	res.CheckMessage = fmt.Sprintf("every host gathered exactly the rows the %d tables hold for it (counts and checksums)", N)
	return nil
}
