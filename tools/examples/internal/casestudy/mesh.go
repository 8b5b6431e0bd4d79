package casestudy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// Mesh is one node's kernel-TCP connections: Out[p][l] to node p for lane
// l (a worker, a shard), In[p][l] from node p for lane l; nil where there
// is none.
type Mesh struct {
	Out, In [][]net.Conn
	ln      net.Listener
}

// Meshes connects the nodes at places over kernel TCP, one connection per
// pair of connected nodes and lane each way: node i dials peers(i) (nil:
// every other node), each connection opening with a 4-byte hello (node,
// lane).
func Meshes(ctx context.Context, places []Place, lanes int, peers func(node int) []int) ([]*Mesh, error) {
	N := len(places)
	lns := make([]net.Listener, N)
	addrs := make([]string, N)
	for i, pl := range places {
		ln, err := pl.ListenTCP()
		if err != nil {
			for _, l := range lns[:i] {
				l.Close()
			}
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		lns[i], addrs[i] = ln, ln.Addr().String()
	}
	ms := make([]*Mesh, N)
	errs := make([]error, N)
	var wg sync.WaitGroup
	for i := range N {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ms[i], errs[i] = ConnectMesh(ctx, i, lanes, addrs, peers, lns[i], places[i].Dial)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, m := range ms {
			if m != nil {
				m.Close()
			}
		}
		return nil, err
	}
	return ms, nil
}

// peersFunc is peers, or (nil) every other of n nodes.
func peersFunc(n int, peers func(node int) []int) func(int) []int {
	if peers != nil {
		return peers
	}
	return func(i int) []int {
		var ps []int
		for j := range n {
			if j != i {
				ps = append(ps, j)
			}
		}
		return ps
	}
}

// ConnectMesh is node id's part of Meshes, for a node in a process of its
// own: it accepts, on its listener ln, the connections of every node whose
// peers include id, and dials lanes connections to each of its own peers
// at addrs (every node's listener, by node).
func ConnectMesh(ctx context.Context, id, lanes int, addrs []string, peers func(node int) []int, ln net.Listener,
	dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*Mesh, error) {
	peersOf := peersFunc(len(addrs), peers)
	dialers := 0 // nodes that dial id
	for j := range addrs {
		if slices.Contains(peersOf(j), id) {
			dialers++
		}
	}
	return connectMesh(ctx, id, lanes, addrs, peersOf(id), dialers, ln, dial)
}

// connectMesh accepts dialers*lanes connections on ln and dials lanes
// connections to each of peers.
func connectMesh(ctx context.Context, id, lanes int, addrs []string, peers []int, dialers int, ln net.Listener,
	dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*Mesh, error) {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	n := len(addrs)
	m := &Mesh{Out: make([][]net.Conn, n), In: make([][]net.Conn, n), ln: ln}
	for p := range n {
		m.Out[p] = make([]net.Conn, lanes)
		m.In[p] = make([]net.Conn, lanes)
	}
	accepted := make(chan error, 1)
	var amu sync.Mutex
	go func() {
		for range dialers * lanes {
			conn, err := ln.Accept()
			if err != nil {
				accepted <- err
				return
			}
			var hdr [4]byte
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(conn, hdr[:]); err != nil {
				conn.Close()
				accepted <- err
				return
			}
			conn.SetReadDeadline(time.Time{})
			p, l := int(binary.BigEndian.Uint16(hdr[:])), int(binary.BigEndian.Uint16(hdr[2:]))
			if p >= n || l >= lanes || p == id {
				conn.Close()
				accepted <- fmt.Errorf("tcp: bad hello from %v: node %d lane %d", conn.RemoteAddr(), p, l)
				return
			}
			amu.Lock()
			m.In[p][l] = conn
			amu.Unlock()
		}
		accepted <- nil
	}()
	fail := func(err error) (*Mesh, error) {
		m.Close()
		<-accepted // Close ended the accept loop
		return nil, err
	}
	for _, p := range peers {
		for l := range lanes {
			var (
				conn net.Conn
				err  error
			)
			for {
				conn, err = dial(ctx, "tcp", addrs[p])
				if err == nil || ctx.Err() != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				return fail(fmt.Errorf("tcp: connect to node %d: %w", p, err))
			}
			var hdr [4]byte
			binary.BigEndian.PutUint16(hdr[:], uint16(id))
			binary.BigEndian.PutUint16(hdr[2:], uint16(l))
			if _, err := conn.Write(hdr[:]); err != nil {
				conn.Close()
				return fail(fmt.Errorf("tcp: hello to node %d: %w", p, err))
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetNoDelay(true)
			}
			m.Out[p][l] = conn
		}
	}
	var err error
	select {
	case err = <-accepted:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("tcp: accepting: %w", err)
	}
	return m, nil
}

// Close closes the listener and every connection.
func (m *Mesh) Close() error {
	if m.ln != nil {
		m.ln.Close()
	}
	for p := range m.Out {
		for l := range m.Out[p] {
			if c := m.Out[p][l]; c != nil {
				c.Close()
			}
			if c := m.In[p][l]; c != nil {
				c.Close()
			}
		}
	}
	return nil
}
