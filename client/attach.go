package client

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/alloc"
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

// AttachOptions configure Attach.
type AttachOptions struct {
	Name    string // shown by vnicctl tenants
	Queues  int    // receive queues (cores), default 1
	Match   Match
	AxSize  int // 0: vnicd's default
	BxSize  int
	TxSize  int
	Buffers int
	// Batch is the most packets one Recv returns (default 32).
	Batch int
	// Spin is how long Wait polls before it sleeps on the queue's eventfd
	// (default 50µs; 0 keeps the default, negative sleeps at once).
	Spin time.Duration
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
	if o.Queues == 0 {
		o.Queues = 1
	}
	conn, err := proto.Dial(socketPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ECONNREFUSED) {
			return nil, fmt.Errorf("client: vnicd is not running at %s; start it with: vnicd run --socket %s: %w", socketPath, socketPath, err)
		}
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("client: no permission to connect to %s; join the socket's group (it is mode 0660): %w", socketPath, err)
		}
		return nil, fmt.Errorf("client: connect to vnicd: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.Unix().SetDeadline(dl)
	}
	var rep proto.AttachReply
	files, err := conn.Call(proto.TAttach, proto.Attach{
		Name: o.Name, Queues: o.Queues, AxSize: o.AxSize, BxSize: o.BxSize, TxSize: o.TxSize, Buffers: o.Buffers,
		Match: proto.Match{Proto: o.Match.Proto, DstPortLo: o.Match.DstPortLo, DstPortHi: o.Match.DstPortHi, Dst: o.Match.Dst, Default: o.Match.Default},
	}, &rep)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("client: attach: %w", err)
	}
	conn.Unix().SetDeadline(time.Time{})
	closeFiles := func() {
		for _, f := range files {
			f.Close()
		}
	}
	if len(files) != 1+o.Queues || rep.FDs != len(files) {
		closeFiles()
		conn.Close()
		return nil, fmt.Errorf("client: attach: vnicd sent %d descriptors, want %d (a memfd and one eventfd per queue)", len(files), 1+o.Queues)
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
	t.conn = conn
	t.gone = new(atomic.Bool)
	t.spin = o.Spin
	if t.spin == 0 {
		t.spin = 50 * time.Microsecond
	}
	for i, q := range t.queues {
		q.wake = files[1+i]
		q.gone = t.gone
		q.spin = t.spin
	}
	t.readerDone = make(chan struct{})
	t.detached = make(chan struct{}, 1)
	go t.watch()
	return t, nil
}

// watch blocks on the control connection; any return means vnicd is gone
// (or Close closed it). It wakes every sleeping queue.
func (t *Tenant) watch() {
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
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	for _, q := range t.queues {
		if q.wake != nil {
			unix.Write(int(q.wake.Fd()), one)
		}
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

// Close detaches from vnicd and unmaps the region. Packets still held
// become invalid; call it after the queues' goroutines returned. Closing a
// nil or closed tenant returns ErrClosed.
func (t *Tenant) Close() error {
	if t == nil {
		return ErrClosed
	}
	err := ErrClosed
	t.closeOnce.Do(func() {
		err = nil
		t.closed.Store(true)
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
		for _, q := range t.queues {
			if q.wake != nil {
				q.wake.Close()
			}
		}
		if t.conn != nil {
			err = t.Region.Close()
		}
	})
	return err
}

// Wait blocks until the queue has a packet, ctx ends or vnicd goes away.
// It returns the allocator's error (see Queue.Err) once the tenant's
// allocator is found corrupt.
// It polls for the Spin time, then sets the ring's need-wakeup flag and
// sleeps on the queue's eventfd, so an idle application uses no CPU.
func (q *Queue) Wait(ctx context.Context) error {
	if q.dead() {
		return ErrClosed
	}
	if err := q.Err(); errors.Is(err, alloc.ErrCorrupt) {
		return err // no buffers will come back: Recv would starve silently
	}
	deadline := time.Now().Add(q.spin)
	for i := 0; ; i++ {
		if q.bx.Ready() {
			return nil
		}
		if q.gone != nil && q.gone.Load() {
			return ErrDaemonGone
		}
		if i%64 == 63 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if time.Now().After(deadline) {
				break
			}
			runtime.Gosched()
		}
	}
	if q.wake == nil { // an in-process tenant has no eventfd: nap and poll
		for !q.bx.Ready() {
			if err := ctx.Err(); err != nil {
				return err
			}
			time.Sleep(20 * time.Microsecond)
		}
		return nil
	}
	q.bx.SetNeedWakeup(true)
	defer q.bx.SetNeedWakeup(false)
	fds := []unix.PollFd{{Fd: int32(q.wake.Fd()), Events: unix.POLLIN}}
	var buf [8]byte
	for {
		// Check after setting the flag: vnicd posts, then reads the flag.
		if q.bx.Ready() {
			return nil
		}
		if q.gone.Load() {
			return ErrDaemonGone
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := unix.Poll(fds, 100)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("client: wait on eventfd: %w", os.NewSyscallError("poll", err))
		}
		if n > 0 {
			unix.Read(int(q.wake.Fd()), buf[:])
		}
	}
}
