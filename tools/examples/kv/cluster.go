package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/tools/examples/internal/casestudy"
)

// Place is where one node's sockets live (and its vnicd).
type Place = casestudy.Place

// ClusterConfig is an in-process KV cluster: node 0 the primary, nodes
// 1..len(Places)-1 the secondaries.
type ClusterConfig struct {
	// ClusterConfig is the nodes' places and the replication network;
	// Transport is "hot" (the bi-channel with hot-path acknowledgements,
	// the paper's mode), "bi" (the bi-channel with its acknowledgements
	// in the TCP control path's batches) or "tcp" (kernel TCP).
	casestudy.ClusterConfig
	Shards int
	// Sizing is the load the nodes' shards are sized for up front.
	Sizing
}

// Cluster is a running KV cluster.
type Cluster struct {
	cfg        ClusterConfig
	Primary    *Primary
	Secondary  []*Secondary // [0] is nil
	repls      []Repl
	cancels    []context.CancelFunc
	clientLn   net.Listener
	ClientAddr string
	wg         sync.WaitGroup
	killed     []bool
	pctx       context.Context // the primary's
}

// NewCluster connects the replication network and starts every node and
// the primary's client listener.
func NewCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	N := len(cfg.Places)
	if N < 2 {
		return nil, fmt.Errorf("kv: %d nodes: give a primary and at least one secondary", N)
	}
	cl := &Cluster{cfg: cfg, repls: make([]Repl, N), cancels: make([]context.CancelFunc, N), Secondary: make([]*Secondary, N), killed: make([]bool, N)}
	if N-1 > MaxSecondaries {
		return nil, fmt.Errorf("kv: %d secondaries: at most %d", N-1, MaxSecondaries)
	}
	peersOf := peersOf(N)
	switch cfg.Transport {
	case "bi", "hot":
		tmpl := cfg.Bi
		tmpl.TolerateDeadPeers = true // the primary goes on with its quorum
		tmpl.HotAcks = cfg.Transport == "hot"
		eps, err := casestudy.Endpoints(ctx, casestudy.EndpointsConfig{Places: cfg.Places, Workers: cfg.Shards,
			Template: tmpl, Fast: cfg.Fast, FastPath: cfg.FastPath, Peers: peersOf})
		if err != nil {
			return nil, fmt.Errorf("kv: %w", err)
		}
		for i, e := range eps {
			cl.repls[i] = BiRepl{e}
		}
	case "tcp":
		ms, err := casestudy.Meshes(ctx, cfg.Places, cfg.Shards, peersOf)
		if err != nil {
			return nil, fmt.Errorf("kv: %w", err)
		}
		for i, m := range ms {
			cl.repls[i] = NewTCPRepl(m, cfg.Shards)
		}
	default:
		return nil, fmt.Errorf("kv: transport %q: give hot, bi or tcp", cfg.Transport)
	}
	for i := range N {
		nctx, cancel := context.WithCancel(context.Background())
		cl.cancels[i] = cancel
		if i == 0 {
			cl.pctx = nctx
			cl.Primary = StartPrimary(nctx, cfg.Shards, N-1, cfg.Sizing, cl.repls[0])
		} else {
			cl.Secondary[i] = StartSecondary(nctx, i, cfg.Shards, cfg.Sizing, cl.repls[i])
		}
	}
	ln, err := cfg.Places[0].ListenTCP()
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("kv: client listener: %w", err)
	}
	cl.clientLn, cl.ClientAddr = ln, ln.Addr().String()
	serveClients(cl.pctx, ln, cl.Primary, &cl.wg)
	return cl, nil
}

// serveClients has p serve every client connection ln accepts, until ln
// closes.
func serveClients(ctx context.Context, ln net.Listener, p *Primary, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*net.TCPConn).SetNoDelay(true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.Serve(ctx, c)
			}()
		}
	}()
}

// Addr is the primary's client listener.
func (cl *Cluster) Addr() string { return cl.ClientAddr }

// Stats is node i's bi-channel counters; false on kernel TCP.
func (cl *Cluster) Stats(i int) (bichannel.Stats, bool) {
	if e := cl.Endpoint(i); e != nil {
		return e.Stats(), true
	}
	return bichannel.Stats{}, false
}

// CPU is 0: the nodes share this process with the client.
func (cl *Cluster) CPU() (time.Duration, error) { return 0, nil }

// Endpoint returns node i's bi-channel endpoint, or nil on kernel TCP.
func (cl *Cluster) Endpoint(i int) *bichannel.Endpoint {
	if b, ok := cl.repls[i].(BiRepl); ok {
		return b.E
	}
	return nil
}

// Kill stops secondary i abruptly: its shard workers end and its
// replication connections close, as if its process died.
func (cl *Cluster) Kill(i int) {
	if i < 1 || i >= len(cl.repls) || cl.killed[i] {
		return
	}
	cl.killed[i] = true
	cl.repls[i].Close()
	cl.cancels[i]()
	cl.Secondary[i].Wait()
}

// Live returns the nodes not killed.
func (cl *Cluster) Live() []int {
	var ids []int
	for i, k := range cl.killed {
		if !k {
			ids = append(ids, i)
		}
	}
	return ids
}

func (cl *Cluster) closeRepls() {
	for _, r := range cl.repls {
		if r != nil {
			r.Close()
		}
	}
}

// Close stops every node.
func (cl *Cluster) Close() error {
	if cl.clientLn != nil {
		cl.clientLn.Close()
	}
	for _, c := range cl.cancels {
		if c != nil {
			c()
		}
	}
	cl.closeRepls()
	if cl.Primary != nil {
		cl.Primary.Wait()
	}
	for _, s := range cl.Secondary {
		if s != nil {
			s.Wait()
		}
	}
	cl.wg.Wait()
	return nil
}

// CatchUp waits until every live secondary applied everything the primary
// replicated, or the timeout passes.
func (cl *Cluster) CatchUp(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		behind := ""
		for sh, ps := range cl.Primary.Shard {
			ps.mu.Lock()
			last := ps.next - 1
			ps.mu.Unlock()
			for _, i := range cl.Live()[1:] {
				r := cl.Secondary[i].Shard[sh]
				r.mu.Lock()
				if r.Applied < last {
					behind = fmt.Sprintf("node %d shard %d applied up to %d of %d", i, sh, r.Applied, last)
				}
				r.mu.Unlock()
			}
		}
		if behind == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kv: secondaries did not catch up in %v: %s", timeout, behind)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Check compares every live replica with the acknowledged log: each
// acknowledged update is in the replica's log under its version, with its
// key and value, and each key's current version is at least the newest
// acknowledged one (later unacknowledged updates may have been applied
// too). It also reports order violations (a newer version of a key
// replaced by an older one).
func (cl *Cluster) Check(acked []Acked) error {
	var errs []error
	for _, i := range cl.Live() {
		for sh := range cl.cfg.Shards {
			var rep *Replica
			if i == 0 {
				rep = cl.Primary.Shard[sh].Replica
			} else {
				rep = cl.Secondary[i].Shard[sh]
			}
			table, log, viol := rep.Snapshot()
			errs = append(errs, checkReplica(i, sh, cl.cfg.Shards, table, log, viol, acked)...)
		}
	}
	return errors.Join(errs...)
}

// checkReplica is Check of node i's replica of shard sh.
func checkReplica(i, sh, shards int, table map[uint64]Entry, log []Update, viol uint64, acked []Acked) []error {
	var errs []error
	if viol != 0 {
		errs = append(errs, fmt.Errorf("node %d shard %d: %d order violations", i, sh, viol))
	}
	for j, u := range log {
		if u.Version != uint64(j+1) {
			errs = append(errs, fmt.Errorf("node %d shard %d: log entry %d has version %d", i, sh, j, u.Version))
			break
		}
	}
	lost := 0
	for _, a := range acked {
		if ShardOf(a.Key, shards) != sh {
			continue
		}
		ok := a.Version >= 1 && a.Version <= uint64(len(log)) && log[a.Version-1].Key == a.Key && log[a.Version-1].Value == a.Value &&
			table[a.Key].Version >= a.Version
		if !ok {
			if lost++; lost <= 3 {
				errs = append(errs, fmt.Errorf("node %d shard %d: acknowledged update of key %d version %d is missing or different", i, sh, a.Key, a.Version))
			}
		}
	}
	if lost > 3 {
		errs = append(errs, fmt.Errorf("node %d shard %d: %d acknowledged updates lost in all", i, sh, lost))
	}
	return errs
}
