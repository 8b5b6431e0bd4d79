package hostile

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/futex"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/shm"
)

// wakeAbuse attaches one single-queue tenant by hand (to hold its raw
// descriptors) and turns everything it holds of the wake-up channel
// against vnicd: it tries to pass a lingering TCP socket through its
// doorbell (whose final close, run by whoever drops it, blocks), makes the
// doorbell blocking, hangs p.N epoll waiters on it, parks p.Repeat
// threads on its signal word, and then, until stopped, publishes a new
// need-wakeup generation on every batch it receives (so that vnicd
// signals it all the time) and rings its doorbell every 50 µs.
func wakeAbuse(sock string, p params) (string, func() string) {
	t0 := time.Now()
	conn, err := proto.Dial(sock)
	if err != nil {
		return "dial: " + err.Error(), func() string { return "" }
	}
	a := p.Attach
	var rep proto.AttachReply
	files, err := conn.Call(proto.TAttach, proto.Attach{Name: a.Name, Queues: 1, AxSize: a.AxSize, BxSize: a.BxSize, Buffers: a.Buffers,
		Match: proto.Match{Proto: a.Match.Proto, DstPortLo: a.Match.DstPortLo, DstPortHi: a.Match.DstPortHi}}, &rep)
	if err != nil || len(files) != 2 {
		conn.Close()
		return fmt.Sprintf("attach: %v (%d descriptors)", err, len(files)), func() string { return "" }
	}
	region, err := shm.Map(files[0])
	files[0].Close()
	if err != nil {
		conn.Close()
		return "map: " + err.Error(), func() string { return "" }
	}
	ten, err := client.Local(region, client.Options{})
	if err != nil {
		conn.Close()
		return "local: " + err.Error(), func() string { return "" }
	}
	bell := files[1]
	fd := int(bell.Fd())

	rights := "refused"
	ls, release, err := testutil.LingeringSocket()
	if err != nil {
		rights = "no lingering socket: " + err.Error()
	} else {
		if err := unix.Sendmsg(fd, []byte{1}, unix.UnixRights(ls), nil, unix.MSG_DONTWAIT); err == nil {
			rights = "SENT"
		} else {
			rights = "refused (" + err.Error() + ")"
		}
	}
	unix.SetNonblock(fd, false)
	ep, _ := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	var dups []int
	for i := 0; i < p.N; i++ {
		d, err := unix.Dup(fd)
		if err != nil {
			break
		}
		dups = append(dups, d)
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT, Fd: int32(d)}
		unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, d, &ev)
	}
	sig, need := region.Signal(0), region.NeedWakeup(0)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < p.Repeat; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			for !stop.Load() {
				futex.Wait(sig, atomic.LoadUint32(sig), 0)
			}
		}()
	}
	var got, rings atomic.Int64
	wg.Add(2)
	go func() {
		defer wg.Done()
		q := ten.Queue(0)
		pk := make([]client.Packet, 0, 32)
		for g := uint32(1); !stop.Load(); g++ {
			atomic.StoreUint32(need, g|1)
			pk, _ = q.Recv(pk[:0])
			got.Add(int64(len(pk)))
			q.Release(pk)
			if len(pk) == 0 {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	go func() {
		defer wg.Done()
		one := [8]byte{1}
		for !stop.Load() {
			// Non-blocking for this loop's own sake: the doorbell's file
			// description, which vnicd shares, stays blocking.
			if n, _ := unix.Write(fd, one[:]); n == 8 {
				rings.Add(1)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	return fmt.Sprintf("SCM_RIGHTS on the doorbell %s; %d epoll waiters; %d threads on the signal word (ready after %v)",
			rights, len(dups), p.Repeat, time.Since(t0).Round(time.Millisecond)), func() string {
			stop.Store(true)
			atomic.AddUint32(sig, 1)
			futex.Wake(sig, math.MaxInt32)
			wg.Wait()
			for _, d := range dups {
				unix.Close(d)
			}
			unix.Close(ep)
			if release != nil { // a plain close would block this child for the linger time
				release()
			}
			bell.Close()
			region.Close()
			conn.Close()
			return fmt.Sprintf("%d frames received, %d rings", got.Load(), rings.Load())
		}
}
