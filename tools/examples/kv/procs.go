package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/tools/examples/internal/casestudy"
)

// With -procs per-host every node runs in a process of its own: this
// binary again, with nodeEnv holding its nodeSpec. The node listens and
// says where (fromNode.Addr); once the parent has sent every node's
// address it connects, starts its primary or secondary and says so; then
// it answers the parent's requests (the primary's last versions, catching
// up, its replicas' snapshots for -check, its endpoint's counters) until
// its stdin closes. The load client stays in the parent.

// nodeEnv holds, in a node's own process, its nodeSpec as JSON.
const nodeEnv = "VNIC_KV_NODE"

// nodeSpec is what a node's process is built from.
type nodeSpec struct {
	ID, Nodes, Shards int
	Sizing            Sizing // the replicas' tables and logs
	Transport         string // hot, bi or tcp
	Fast              bichannel.FastMode
	IP                netip.Addr
	VNIC              transport.VNICConfig
	Testbed           string // else loopback
	Timeout           time.Duration
}

// toNode is a message to a node's process: the nodes' replication
// addresses first, then requests.
type toNode struct {
	Addrs   []string
	Op      string        // "stats", "catchup" or "snapshot"
	Last    []uint64      // catchup: the primary's last version, by shard
	Timeout time.Duration // catchup: how long to wait
}

// fromNode is a node process's answer.
type fromNode struct {
	Err              string
	Addr, ClientAddr string
	Last             []uint64 // the primary's last version, by shard
	Stats            *bichannel.Stats
	Snaps            []shardSnap
}

// shardSnap is a replica's Snapshot.
type shardSnap struct {
	Table      map[uint64]Entry
	Log        []Update
	Violations uint64
}

// biTemplate is the bi-channel configuration of every step.
func biTemplate() bichannel.Config {
	return bichannel.Config{Flows: 2, BuffersPerFlow: 256, RetransmitTimeout: 5 * time.Millisecond, AckDelay: time.Millisecond, HeartbeatTimeout: 10 * time.Second,
		Preallocate: true} // as a database preallocates its pools: no first touch on the data path
}

// peersOf is who node i talks to: the primary to every secondary,
// secondaries to the primary only.
func peersOf(n int) func(int) []int {
	return func(i int) []int {
		if i > 0 {
			return []int{0}
		}
		var ps []int
		for j := 1; j < n; j++ {
			ps = append(ps, j)
		}
		return ps
	}
}

// nodeMain is a node in a process of its own.
func nodeMain(js string) int {
	return casestudy.MemberMain("kv node", nodeEnv, js, func(s *nodeSpec) (int, time.Duration) { return s.ID, s.Timeout }, serveNode)
}

func serveNode(s nodeSpec, p *casestudy.Parent) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	place, places, err := casestudy.MemberPlaces(s.Testbed, s.ID, s.Nodes, s.IP, s.VNIC)
	if err != nil {
		return err
	}
	var (
		mn      *casestudy.MemberNet
		hello   fromNode
		repl    Repl
		primary *Primary
		second  *Secondary
		wg      sync.WaitGroup
	)
	nctx, stop := context.WithCancel(context.Background())
	defer func() {
		stop()
		if repl != nil {
			repl.Close()
		} else if mn != nil {
			mn.Close()
		}
		if primary != nil {
			primary.Wait()
		}
		if second != nil {
			second.Wait()
		}
		wg.Wait()
	}()
	var bi *bichannel.Config
	switch s.Transport {
	case "bi", "hot":
		tmpl := biTemplate()
		tmpl.TolerateDeadPeers = true
		tmpl.HotAcks = s.Transport == "hot"
		bi = &tmpl
	case "tcp":
	default:
		return fmt.Errorf("transport %q: give hot, bi or tcp", s.Transport)
	}
	if mn, err = casestudy.ListenMember(places, s.ID, s.Shards, bi, s.Fast); err != nil {
		return err
	}
	hello.Addr = mn.Addr()
	var clientLn net.Listener
	if s.ID == 0 {
		if clientLn, err = place.ListenTCP(); err != nil {
			return fmt.Errorf("client listener: %w", err)
		}
		defer clientLn.Close()
		hello.ClientAddr = clientLn.Addr().String()
	}
	if err := p.Send(hello); err != nil {
		return err
	}
	var m toNode
	if err := p.Recv(&m); err != nil {
		return fmt.Errorf("reading the nodes' addresses: %w", err)
	}
	if len(m.Addrs) != s.Nodes {
		return fmt.Errorf("got %d nodes' addresses, want %d", len(m.Addrs), s.Nodes)
	}
	mesh, err := mn.Connect(ctx, s.ID, s.Shards, m.Addrs, peersOf(s.Nodes))
	if err != nil {
		return err
	}
	if mn.EP != nil {
		repl = BiRepl{mn.EP}
	} else {
		repl = NewTCPRepl(mesh, s.Shards)
	}
	var reps []*Replica
	if s.ID == 0 {
		primary = StartPrimary(nctx, s.Shards, s.Nodes-1, s.Sizing, repl)
		serveClients(nctx, clientLn, primary, &wg)
		for _, ps := range primary.Shard {
			reps = append(reps, ps.Replica)
		}
	} else {
		second = StartSecondary(nctx, s.ID, s.Shards, s.Sizing, repl)
		reps = second.Shard
	}
	if err := p.Send(fromNode{}); err != nil {
		return err
	}
	for {
		var m toNode
		if err := p.Recv(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading a request: %w", err)
		}
		var a fromNode
		switch m.Op {
		case "stats":
			if b, ok := repl.(BiRepl); ok {
				st := b.E.Stats()
				a.Stats = &st
			}
			if primary != nil {
				a.Last = primary.last()
			}
		case "catchup":
			if err := catchUp(reps, m.Last, m.Timeout); err != nil {
				a.Err = fmt.Sprintf("node %d: %v", s.ID, err)
			}
		case "snapshot":
			for _, r := range reps {
				t, l, v := r.Snapshot()
				a.Snaps = append(a.Snaps, shardSnap{Table: t, Log: l, Violations: v})
			}
		default:
			a.Err = fmt.Sprintf("node %d: unknown request %q", s.ID, m.Op)
		}
		if err := p.Send(a); err != nil {
			return err
		}
	}
}

// last is the last version the primary gave out, by shard.
func (p *Primary) last() []uint64 {
	out := make([]uint64, len(p.Shard))
	for sh, ps := range p.Shard {
		ps.mu.Lock()
		out[sh] = ps.next - 1
		ps.mu.Unlock()
	}
	return out
}

// catchUp waits until every replica of reps (by shard) applied up to
// last, or the timeout passes.
func catchUp(reps []*Replica, last []uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		behind := ""
		for sh, r := range reps {
			r.mu.Lock()
			if sh < len(last) && r.Applied < last[sh] {
				behind = fmt.Sprintf("shard %d applied up to %d of %d", sh, r.Applied, last[sh])
			}
			r.mu.Unlock()
		}
		if behind == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("did not catch up in %v: %s", timeout, behind)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// procCluster is a KV cluster whose nodes run each in a process of its
// own.
type procCluster struct {
	nodes  casestudy.Children
	shards int
	addr   string
	mu     sync.Mutex
	killed []bool
}

// procTimeout bounds every answer of a node's process.
const procTimeout = 30 * time.Second

// startProcs starts a node process per place, pinned to cpus (nil:
// unpinned), connects them and waits until every node runs.
func startProcs(cfg ClusterConfig, testbed string, cpus []int, life time.Duration) (_ *procCluster, err error) {
	n := len(cfg.Places)
	if cfg.FastPath != nil {
		return nil, errors.New("kv: -procs per-host cannot carry an in-process fast path to the nodes")
	}
	pc := &procCluster{nodes: make(casestudy.Children, 0, n), shards: cfg.Shards, killed: make([]bool, n)}
	defer func() {
		if err != nil {
			pc.nodes.Kill()
		}
	}()
	for i, pl := range cfg.Places {
		s := nodeSpec{ID: i, Nodes: n, Shards: cfg.Shards, Sizing: cfg.Sizing, Transport: cfg.Transport, Fast: cfg.Fast, IP: pl.IP, VNIC: pl.VNIC, Testbed: testbed, Timeout: life}
		c, err := casestudy.StartChild(fmt.Sprintf("kv node %d", i), nodeEnv, s, cpus)
		if err != nil {
			return nil, err
		}
		pc.nodes = append(pc.nodes, c)
	}
	addrs := make([]string, n)
	for i, c := range pc.nodes {
		var h fromNode
		if err := c.Recv(&h, procTimeout); err != nil {
			return nil, fmt.Errorf("kv: %w", err)
		}
		if h.Err != "" {
			return nil, fmt.Errorf("kv: %s", h.Err)
		}
		addrs[i] = h.Addr
		if i == 0 {
			pc.addr = h.ClientAddr
		}
	}
	for _, c := range pc.nodes {
		if err := c.Send(toNode{Addrs: addrs}); err != nil {
			return nil, fmt.Errorf("kv: %w", err)
		}
	}
	for _, c := range pc.nodes {
		var r fromNode
		if err := c.Recv(&r, procTimeout); err != nil {
			return nil, fmt.Errorf("kv: %w", err)
		}
	}
	return pc, nil
}

// ask sends node i a request and reads its answer.
func (pc *procCluster) ask(i int, m toNode) (fromNode, error) {
	var a fromNode
	if err := pc.nodes[i].Send(m); err != nil {
		return a, fmt.Errorf("kv: %w", err)
	}
	if err := pc.nodes[i].Recv(&a, procTimeout+m.Timeout); err != nil {
		return a, fmt.Errorf("kv: %w", err)
	}
	if a.Err != "" {
		return a, fmt.Errorf("kv: %s", a.Err)
	}
	return a, nil
}

func (pc *procCluster) Addr() string { return pc.addr }

// Kill kills secondary i's process (SIGKILL, by its pid).
func (pc *procCluster) Kill(i int) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if i < 1 || i >= len(pc.nodes) || pc.killed[i] {
		return
	}
	pc.killed[i] = true
	pc.nodes[i].Kill()
}

func (pc *procCluster) live() []int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	var ids []int
	for i, k := range pc.killed {
		if !k {
			ids = append(ids, i)
		}
	}
	return ids
}

func (pc *procCluster) CatchUp(timeout time.Duration) error {
	a, err := pc.ask(0, toNode{Op: "stats"})
	if err != nil {
		return err
	}
	for _, i := range pc.live()[1:] {
		if _, err := pc.ask(i, toNode{Op: "catchup", Last: a.Last, Timeout: timeout}); err != nil {
			return err
		}
	}
	return nil
}

func (pc *procCluster) Check(acked []Acked) error {
	var errs []error
	for _, i := range pc.live() {
		a, err := pc.ask(i, toNode{Op: "snapshot"})
		if err != nil {
			return err
		}
		if len(a.Snaps) != pc.shards {
			return fmt.Errorf("kv: node %d sent %d shards' snapshots, want %d", i, len(a.Snaps), pc.shards)
		}
		for sh, s := range a.Snaps {
			errs = append(errs, checkReplica(i, sh, pc.shards, s.Table, s.Log, s.Violations, acked)...)
		}
	}
	return errors.Join(errs...)
}

func (pc *procCluster) Stats(i int) (bichannel.Stats, bool) {
	pc.mu.Lock()
	killed := pc.killed[i]
	pc.mu.Unlock()
	if killed {
		return bichannel.Stats{}, false
	}
	a, err := pc.ask(i, toNode{Op: "stats"})
	if err != nil || a.Stats == nil {
		return bichannel.Stats{}, false
	}
	return *a.Stats, true
}

// CPU is the node processes' CPU time so far.
func (pc *procCluster) CPU() (time.Duration, error) { return pc.nodes.CPU() }

// Close ends every node's process.
func (pc *procCluster) Close() error {
	var errs []error
	for i, c := range pc.nodes {
		pc.mu.Lock()
		killed := pc.killed[i]
		pc.mu.Unlock()
		if !killed {
			errs = append(errs, c.Close(10*time.Second))
		}
	}
	return errors.Join(errs...)
}
