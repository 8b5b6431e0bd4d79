package client

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/shm"
)

// ErrDaemonGone reports that vnicd closed the control connection (it
// stopped or died). The region stays mapped but receives nothing more;
// Close the tenant and Attach again once vnicd is back.
var ErrDaemonGone = errors.New("client: vnicd is gone; Close this tenant and Attach again")

// Match selects the frames a tenant receives. Zero fields match anything;
// a rule with no fields must set Default.
type Match struct {
	Proto     string // "udp", "tcp" or ""
	DstPortLo uint16 // inclusive range; 0,0 = any
	DstPortHi uint16
	Dst       string // destination prefix, e.g. "198.19.0.0/16"
	Default   bool   // receive what no other tenant claims
}

// Host is a tenant's identity when vnicd emulates a network between its
// tenants: frames other hosts send to Addr reach this tenant, and the
// frames it sends must come from Addr and MAC (the network drops others as
// spoofed).
type Host struct {
	Addr string // unicast IPv4 address, e.g. "198.18.0.1"
	// MAC is a unicast Ethernet address, e.g. "02:00:c6:12:00:01"; empty:
	// 02:00 followed by Addr's four bytes (02:00:c6:12:00:01 for
	// 198.18.0.1).
	MAC string
	// Key is the host's own RSS key (nil: vnicd's). Tenant.RSS reports the
	// key vnicd uses either way.
	Key []byte
}

// AttachOptions configure Attach.
type AttachOptions struct {
	Name   string // shown by vnicctl tenants
	Queues int    // receive queues (cores), default 1
	Match  Match
	// Host, if set, is the host this tenant is on vnicd's emulated network
	// (required when vnicd emulates one).
	Host    *Host
	AxSize  int // 0: vnicd's default
	BxSize  int
	TxSize  int
	Buffers int
	// Batch is the most packets one Recv returns (default 32).
	Batch int
	// Spin is how long Wait polls before it sleeps on the queue's socket
	// (default 50µs, or none while vnicd coalesces: it then posts once per
	// nap, and nothing arrives before its next nap ends; 0 keeps the
	// default, negative sleeps at once).
	Spin time.Duration
	// Coalesce turns Wait's polling into naps (interrupt moderation, like
	// vnicd's --rx-coalesce-usecs): instead of spinning, Wait sleeps this
	// long on a timer between looks at the ring, for up to
	// max(Spin, 4·Coalesce), and then sleeps on the queue's socket as
	// usual. Packets wait up to Coalesce more; a queue that receives at a
	// low or medium rate uses a fraction of the CPU spinning costs. During
	// a nap vnicd still wakes the queue if its Ax ring runs low (under
	// half its buffers posted), so a burst cannot drain it while the timer
	// runs. 0 (the default) spins. Where vnicd coalesces itself
	// (--rx-coalesce-usecs), leave this 0: Wait then sleeps at once and
	// vnicd wakes it once per nap, which costs less.
	Coalesce time.Duration
	// Interrupts makes Wait sleep on the queue's receive interrupt in Go's
	// netpoller, where vnicd offers it: a sleeping Wait parks only its
	// goroutine, and the process's sleeping queues and sockets share the
	// one thread that waits in epoll. Without it (the default) Wait sleeps
	// on the queue's futex word, a thread blocked in the kernel per
	// sleeping queue, which the kernel wakes at once. Parking suits a
	// process with other goroutines to run while its queues sleep (the
	// bi-channel asks for it); but Go notices the interrupt only when one
	// of its Ps looks, so beside busy goroutines a parked Wait can wake
	// 10 ms late, where a blocked thread does not.
	Interrupts bool
}

// RSSInfo is the tenant's receive-side scaling configuration, for senders
// that aim flows at its queues.
type RSSInfo struct {
	Profile string
	Key     []byte
	RETA    []uint16
}

// Attach connects to vnicd at socketPath, asks for a tenant, maps the region
// it receives and fills the Ax rings. The connection stays open for the
// tenant's lifetime: closing it (Close, or the process exiting) detaches.
func Attach(ctx context.Context, socketPath string, o AttachOptions) (*Tenant, error) {
	if err := platformSupported(); err != nil {
		return nil, err
	}
	if o.Queues == 0 {
		o.Queues = 1
	}
	conn, err := proto.Dial(socketPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ECONNREFUSED) {
			return nil, fmt.Errorf("client: vnicd is not running at %s (no socket, or nothing listens on it); start vnicd with its control socket at that path, or pass Attach the path it uses (for the examples, such as the quickstart, set VNIC_SOCKET to it): %w", socketPath, err)
		}
		if errors.Is(err, os.ErrPermission) {
			return nil, permissionError(socketPath, err)
		}
		return nil, fmt.Errorf("client: connect to vnicd: %w", err)
	}
	// When ctx ends (cancelled, or its deadline passed) the exchange ends
	// at once: a deadline in the past fails the pending read or write, and
	// the error below is ctx's.
	stop := context.AfterFunc(ctx, func() { conn.Unix().SetDeadline(time.Unix(1, 0)) })
	var rep proto.AttachReply
	req := proto.Attach{
		Name: o.Name, Queues: o.Queues, AxSize: o.AxSize, BxSize: o.BxSize, TxSize: o.TxSize, Buffers: o.Buffers,
		Match:      proto.Match{Proto: o.Match.Proto, DstPortLo: o.Match.DstPortLo, DstPortHi: o.Match.DstPortHi, Dst: o.Match.Dst, Default: o.Match.Default},
		Interrupts: o.Interrupts,
	}
	if h := o.Host; h != nil {
		req.Host = &proto.Host{Addr: h.Addr, MAC: h.MAC, Key: hex.EncodeToString(h.Key)}
	}
	files, err := conn.Call(proto.TAttach, req, &rep)
	if !stop() && err == nil {
		// ctx ended just as the reply came: honour it.
		for _, f := range files {
			f.Close()
		}
		err = ctx.Err()
	}
	if err != nil {
		conn.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("client: attach: %w (%w)", cerr, err)
		}
		return nil, fmt.Errorf("client: attach: %w", err)
	}
	conn.Unix().SetDeadline(time.Time{})
	closeFiles := func() {
		for _, f := range files {
			f.Close()
		}
	}
	want, what := 1+o.Queues, "a memfd and one doorbell per queue"
	if rep.Interrupts {
		want, what = 1+2*o.Queues, "a memfd, one doorbell and one interrupt per queue"
	}
	if len(files) != want || rep.FDs != len(files) || rep.Interrupts && !req.Interrupts {
		closeFiles()
		conn.Close()
		return nil, fmt.Errorf("client: attach: vnicd sent %d descriptors, want %d (%s)", len(files), want, what)
	}
	region, err := shm.Map(files[0])
	files[0].Close()
	if err != nil {
		closeFiles()
		conn.Close()
		return nil, fmt.Errorf("client: map the region vnicd sent: %w", err)
	}
	if int(region.Geo.NumBx) != o.Queues {
		region.Close()
		closeFiles()
		conn.Close()
		return nil, fmt.Errorf("client: region has %d queues, asked for %d", region.Geo.NumBx, o.Queues)
	}
	t, err := Local(region, Options{Batch: o.Batch})
	if err != nil {
		region.Close()
		closeFiles()
		conn.Close()
		return nil, err
	}
	key, _ := hex.DecodeString(rep.RSS.Key)
	t.ID = rep.Tenant
	t.RSS = RSSInfo{Profile: rep.RSS.Profile, Key: key, RETA: rep.RSS.RETA}
	t.Offloads = Offloads{TxChecksum: rep.Offloads.TxChecksum}
	t.conn = conn
	t.gone = new(atomic.Bool)
	t.spin = o.Spin
	if t.spin == 0 {
		t.spin = 50 * time.Microsecond
		if rep.RxCoalesceUs > 0 {
			t.spin = -1 // vnicd posts once per nap: nothing to spin for
		}
	}
	for i, q := range t.queues {
		q.wake = files[1+i]
		q.wfd = rawFD(q.wake)
		if rep.Interrupts {
			q.setIRQ(files[1+o.Queues+i])
		}
		q.gone = t.gone
		q.spin = t.spin
		q.coalesce = o.Coalesce
		q.needWake = region.NeedWakeup(i)
		q.signal = region.Signal(i)
		q.engSleep = region.EngineSleeping()
	}
	t.readerDone = make(chan struct{})
	t.detached = make(chan struct{}, 1)
	t.tg.enter() // the watcher's, left when it returns
	go t.watch()
	return t, nil
}

// watch blocks on the control connection; any return means vnicd is gone
// (or Close closed it). It wakes every sleeping queue. It holds the
// tenant's gate (entered by Attach) until it returns.
func (t *Tenant) watch() {
	defer t.tg.leave()
	defer close(t.readerDone)
	for {
		typ, _, files, err := t.conn.Recv()
		for _, f := range files {
			f.Close()
		}
		if err != nil {
			break
		}
		if typ == proto.TOK || typ == proto.TError {
			select {
			case t.detached <- struct{}{}:
			default:
			}
		}
	}
	t.gone.Store(true)
	// Wake every sleeping queue: each finds gone set.
	for _, q := range t.queues {
		q.kick()
	}
}

// Err returns ErrDaemonGone once vnicd has gone away, ErrClosed for a
// closed or nil tenant, else nil.
func (t *Tenant) Err() error {
	if t == nil || t.closed.Load() {
		return ErrClosed
	}
	if t.gone != nil && t.gone.Load() && !t.closed.Load() {
		return ErrDaemonGone
	}
	return nil
}

// Close detaches from vnicd and unmaps the region, as net.Conn's Close
// does: it may be called while other goroutines are inside the queues'
// methods. Every Wait in flight wakes and returns ErrClosed, and every
// later call returns ErrClosed; Recv, Release and Send in flight finish
// first. The region stays mapped until the last call in flight returns,
// which unmaps it; Close does not wait for them. Packets received and not
// released (their Data), and counter blocks from Queue.Counters, alias the
// region: they are not valid after Close. Closing a nil or closed tenant
// returns ErrClosed.
func (t *Tenant) Close() error {
	if t == nil {
		return ErrClosed
	}
	err := ErrClosed
	t.closeOnce.Do(func() {
		err = nil
		// Calls that have not entered a gate see closed and return; the
		// tenant's gate is still open, so this one enters it and may
		// touch the region while it wakes the sleepers.
		t.closed.Store(true)
		inside := t.tg.enter()
		if inside {
			for _, q := range t.queues {
				q.kick()
			}
		}
		for _, q := range t.queues {
			q.g.shut()
		}
		if t.conn != nil {
			// Detach synchronously, so that a new tenant with the same
			// match rule can attach as soon as Close returns.
			if !t.gone.Load() && t.conn.Send(proto.TDetach, nil) == nil {
				select {
				case <-t.detached:
				case <-t.readerDone:
				case <-time.After(2 * time.Second):
				}
			}
			t.conn.Close()
			<-t.readerDone
		}
		t.tg.shut()
		if inside {
			t.tg.leave()
		}
		if t.open.Load() == 0 {
			// Every gate drained: the last one frees (or is freeing);
			// Do waits for it, so freeErr is read after it is written.
			t.freeOnce.Do(t.free)
			err = t.freeErr
		}
	})
	return err
}

// gateDrained counts a drained gate; the last one frees what the calls in
// flight used: the doorbells and (for an attached tenant) the region.
func (t *Tenant) gateDrained() {
	if t.open.Add(-1) != 0 {
		return
	}
	t.freeOnce.Do(t.free)
}

// free closes the doorbells and (for an attached tenant) the region; once,
// through freeOnce.
func (t *Tenant) free() {
	for _, q := range t.queues {
		if q.wake != nil {
			q.wake.Close()
		}
		if q.irq != nil {
			q.irq.Close()
		}
	}
	if t.conn != nil {
		t.freeErr = t.Region.Close()
	}
}

// permissionError says which group to join to connect to the socket at
// path (mode 0660), and how.
func permissionError(path string, err error) error {
	g := socketGroup(path)
	if g == "" {
		return fmt.Errorf("client: no permission to connect to %s; join the socket's group (sudo usermod -aG GROUP $USER, then log in again) or run as root: %w", path, err)
	}
	return fmt.Errorf("client: no permission to connect to %s; join its group %s (sudo usermod -aG %s $USER, then log in again) or run as root: %w", path, g, g, err)
}
