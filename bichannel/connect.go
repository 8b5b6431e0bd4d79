package bichannel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// maxPreConnectWait bounds how long an accepted connection waits for this
// node's Connect before it is told to dial again.
const maxPreConnectWait = time.Second

// preConnectWait is at most half the handshake timeout, so that the dialer
// hears it should dial again before its own handshake times out.
func (c *Config) preConnectWait() time.Duration {
	return min(maxPreConnectWait, c.HandshakeTimeout/2)
}

// redialDelay is how long a dialer waits before dialing again, after a
// failed dial or an acceptor not ready yet.
const redialDelay = 20 * time.Millisecond

// Connect connects to every peer (Config.Peers when peers is nil): it dials
// those with a higher node id, accepts those with a lower one, exchanges
// hellos (fast-path addresses, queues, RSS configuration, buffers), picks
// the flows and waits until every peer is ready or ctx ends. Call it once.
func (e *Endpoint) Connect(ctx context.Context, peers []Peer) error {
	if peers == nil {
		peers = e.cfg.Peers
	}
	expect := make(map[int]Peer, len(peers))
	for _, pr := range peers {
		switch {
		case pr.ID == e.cfg.NodeID:
			continue // a shared peer list may name this node too
		case pr.ID < 0 || pr.ID > MaxNodeID:
			return fmt.Errorf("bichannel: connect: node id %d: give 0 to %d", pr.ID, MaxNodeID)
		case pr.ID > e.cfg.NodeID && pr.Addr == "":
			return fmt.Errorf("bichannel: connect: node %d has no address, and this node dials it (the lower id dials)", pr.ID)
		}
		if _, dup := expect[pr.ID]; dup {
			return fmt.Errorf("bichannel: connect: node %d listed twice", pr.ID)
		}
		expect[pr.ID] = pr
	}
	var peerIPs map[int][]netip.Addr
	if e.cfg.CheckPeerAddr {
		peerIPs = make(map[int][]netip.Addr, len(expect))
		for id, pr := range expect {
			if id > e.cfg.NodeID {
				continue // this node dials it
			}
			if pr.Addr == "" {
				return fmt.Errorf("bichannel: connect: node %d has no address, and CheckPeerAddr checks where its connection comes from: give its address", id)
			}
			ips, err := resolveHost(ctx, pr.Addr)
			if err != nil {
				return fmt.Errorf("bichannel: connect: node %d: %w", id, err)
			}
			peerIPs[id] = ips
		}
	}
	e.mu.Lock()
	if e.connecting {
		e.mu.Unlock()
		return errors.New("bichannel: connect: already called; an Endpoint connects once")
	}
	if e.isClosing() {
		e.mu.Unlock()
		return ErrClosed
	}
	e.connecting = true
	e.expect = expect
	e.peerIPs = peerIPs
	close(e.expectSet)
	e.mu.Unlock()

	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, len(expect))
	var dials sync.WaitGroup
	defer func() {
		cancel()
		dials.Wait()
	}()
	for _, pr := range expect {
		if pr.ID > e.cfg.NodeID {
			dials.Add(1)
			go func() {
				defer dials.Done()
				if err := e.dial(cctx, pr); err != nil {
					errc <- err
				}
			}()
		}
	}
	for {
		var missing []int
		ps := e.peers()
		for id := range expect {
			p := ps[id]
			if p != nil {
				select {
				case <-p.dead:
					return p.err
				default:
				}
			}
			if p == nil || !p.ready.Load() {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case err := <-errc:
			return err
		case <-e.progress:
		case <-e.closing:
			return ErrClosed
		case <-cctx.Done():
			slices.Sort(missing)
			return fmt.Errorf("bichannel: connect: nodes %v not connected: %w", missing, cctx.Err())
		}
	}
}

// resolveHost returns the IPs of a host:port's host.
func resolveHost(ctx context.Context, addr string) ([]netip.Addr, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", addr, err)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolving %q: %w", host, err)
	}
	for i := range ips {
		ips[i] = ips[i].Unmap()
	}
	return ips, nil
}

// remoteIP is the source address of a connection, or the zero Addr.
func remoteIP(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// errRetry is returned by a dialer's handshake when the acceptor asked it
// to dial again (it has not called Connect yet).
var errRetry = errors.New("the peer is not connecting yet")

// dial connects to a peer with a higher id, retrying while it is not
// listening or connecting yet. It dials from the control listener's IP
// when Listen names one, for peers with CheckPeerAddr.
func (e *Endpoint) dial(ctx context.Context, pr Peer) error {
	var d net.Dialer
	if ta, ok := e.ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
		d.LocalAddr = &net.TCPAddr{IP: ta.IP}
	}
	dial := d.DialContext
	if e.cfg.Dialer != nil {
		dial = e.cfg.Dialer // its own choice of local address
	}
	for {
		conn, err := dial(ctx, "tcp", pr.Addr)
		if err == nil {
			if !e.track(conn) {
				conn.Close()
				return ErrClosed
			}
			// Cancelling ctx aborts the handshake; the handshake disarms
			// this before it declares the peer ready (Connect cancels ctx
			// as soon as every peer is ready).
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			_, err = e.handshake(conn, pr.ID, stop)
			stop()
			e.untrack(conn)
			if err == nil {
				return nil
			}
			conn.Close()
			if !errors.Is(err, errRetry) || ctx.Err() != nil {
				return fmt.Errorf("bichannel: handshake with node %d at %s: %w", pr.ID, pr.Addr, err)
			}
		} else if ctx.Err() != nil {
			return fmt.Errorf("bichannel: connect to node %d at %s: %w", pr.ID, pr.Addr, err)
		}
		select {
		case <-time.After(redialDelay):
		case <-ctx.Done():
			return fmt.Errorf("bichannel: connect to node %d at %s: %w", pr.ID, pr.Addr, ctx.Err())
		case <-e.closing:
			return ErrClosed
		}
	}
}

// track remembers a connection in handshake, so Close can end it.
func (e *Endpoint) track(c net.Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosing() {
		return false
	}
	e.pending[c] = struct{}{}
	return true
}

func (e *Endpoint) untrack(c net.Conn) {
	e.mu.Lock()
	delete(e.pending, c)
	e.mu.Unlock()
}

// admit counts an accepted connection in handshake, or refuses it when
// MaxPending are in handshake, or MaxPendingPerIP from its address.
func (e *Endpoint) admit(c net.Conn, ip netip.Addr) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosing() || e.accepted >= e.cfg.MaxPending || e.pendingIP[ip] >= e.cfg.MaxPendingPerIP {
		return false
	}
	e.accepted++
	e.pendingIP[ip]++
	e.pending[c] = struct{}{}
	return true
}

func (e *Endpoint) unadmit(c net.Conn, ip netip.Addr) {
	e.mu.Lock()
	delete(e.pending, c)
	e.accepted--
	if e.pendingIP[ip]--; e.pendingIP[ip] <= 0 {
		delete(e.pendingIP, ip)
	}
	e.mu.Unlock()
}

func (e *Endpoint) acceptLoop() {
	defer e.wg.Done()
	for {
		conn, err := e.ln.Accept()
		if err != nil {
			if e.isClosing() || errors.Is(err, net.ErrClosed) {
				return
			}
			e.log.Warn().Err(err).Msg("bichannel: accept")
			time.Sleep(10 * time.Millisecond)
			continue
		}
		ip := remoteIP(conn)
		if !e.admit(conn, ip) {
			if e.isClosing() {
				conn.Close()
				return
			}
			// An honest dialer (many nodes behind one address, all
			// connecting at once) dials again after a pause.
			conn.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
			conn.Write(appendReject(nil, rejectRetry, "too many connections in handshake: dial again"))
			conn.Close()
			e.refused(refLimit, conn, fmt.Errorf("more than %d connections in handshake, or %d from %v", e.cfg.MaxPending, e.cfg.MaxPendingPerIP, ip))
			continue
		}
		e.wg.Add(1) // acceptLoop's own count keeps the group above zero
		go func() {
			defer e.wg.Done()
			_, err := e.handshake(conn, -1, nil)
			e.unadmit(conn, ip)
			if err != nil {
				conn.Close()
			}
		}()
	}
}

// refusal is a handshake error with the reason it is counted under.
type refusal struct {
	reason int
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }

func (r *refusal) Unwrap() error { return r.err }

func refuse(reason int, format string, a ...any) error {
	return &refusal{reason, fmt.Errorf(format, a...)}
}

// refused counts a refused handshake and logs it (rate-limited).
func (e *Endpoint) refused(reason int, conn net.Conn, err error) {
	n := e.st.refused[reason].Add(1)
	if e.logAllowed() {
		e.log.Warn().Err(err).Str("from", conn.RemoteAddr().String()).Uint64("count", n).
			Msg("bichannel: refused a control connection (at most one such line a second)")
	}
}
