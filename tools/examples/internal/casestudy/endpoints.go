package casestudy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
)

// EndpointsConfig describes the bi-channel endpoints of a cluster, one per
// Place, node i at Places[i].
type EndpointsConfig struct {
	Places  []Place
	Workers int
	// Template is every node's Config; NodeID, Workers, Listen, the socket
	// hooks, Fast, UDP.IP and VNIC are set from the Place.
	Template bichannel.Config
	Fast     bichannel.FastMode
	// FastPath, if set, builds node i's fast path instead (tests: an
	// in-process network).
	FastPath func(node int) transport.Path
	// Peers returns the nodes node i connects to (nil: every other
	// node). Give both ends of every pair.
	Peers func(node int) []int
}

// Endpoints builds and connects the endpoints.
func Endpoints(ctx context.Context, c EndpointsConfig) ([]*bichannel.Endpoint, error) {
	N := len(c.Places)
	eps := make([]*bichannel.Endpoint, N)
	closeAll := func() {
		for _, e := range eps {
			if e != nil {
				e.Close()
			}
		}
	}
	peers := make([]bichannel.Peer, N)
	for i := range c.Places {
		e, err := NewEndpoint(c, i)
		if err != nil {
			closeAll()
			return nil, err
		}
		eps[i] = e
		peers[i] = bichannel.Peer{ID: i, Addr: e.ControlAddr()}
	}
	errs := make([]error, N)
	var wg sync.WaitGroup
	for i, e := range eps {
		ps := peers
		if c.Peers != nil {
			ps = nil
			for _, j := range c.Peers(i) {
				ps = append(ps, peers[j])
			}
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = e.Connect(ctx, ps) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return nil, err
	}
	return eps, nil
}

// NewEndpoint builds node i's endpoint, not yet connected: its peers
// connect to its ControlAddr.
func NewEndpoint(c EndpointsConfig, i int) (*bichannel.Endpoint, error) {
	pl := c.Places[i]
	cfg := c.Template
	cfg.NodeID, cfg.Workers = i, c.Workers
	cfg.Listen = netip.AddrPortFrom(pl.IP, 0).String()
	cfg.ListenFunc, cfg.Dialer = pl.Listen, pl.Dial
	cfg.Fast = c.Fast
	cfg.UDP.IP, cfg.UDP.ListenUDP = pl.IP, pl.ListenUDP
	cfg.VNIC = pl.VNIC
	if c.FastPath != nil {
		cfg.FastPath = c.FastPath(i)
	}
	e, err := bichannel.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("node %d: %w", i, err)
	}
	return e, nil
}

// LossyFastPaths returns a FastPath builder for EndpointsConfig: every node
// on the in-process network ln.
func LossyFastPaths(ln *lossytest.Net, workers int) func(int) transport.Path {
	return func(int) transport.Path {
		fp, err := ln.NewFastPath(workers)
		if err != nil {
			panic(fmt.Sprintf("casestudy: in-process fast path of %d workers: %v", workers, err))
		}
		return fp
	}
}
