//go:build linux

package nic

import (
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kinds of descriptors in the engine's epoll set (in EpollEvent.Pad).
const (
	fdSource   = 0
	fdControl  = 1
	fdDoorbell = 2
)

// idler is the engine's sleeping place: one epoll set holding the
// source's descriptors, an eventfd the control plane writes (AddTenant,
// RemoveTenant, Run's context) and every tenant's TX doorbells (vnicd's
// ends of the queues' socket pairs).
type idler struct {
	ep, ctl  int
	waitable bool
	events   [64]unix.EpollEvent
	buf      [64]byte
}

func newIdler(src Source) (*idler, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("nic: idle: %w", os.NewSyscallError("epoll_create1", err))
	}
	ctl, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(ep)
		return nil, fmt.Errorf("nic: idle: %w", os.NewSyscallError("eventfd", err))
	}
	d := &idler{ep: ep, ctl: ctl}
	if err := d.add(ctl, fdControl); err != nil {
		d.close()
		return nil, err
	}
	if w, ok := src.(Waitable); ok {
		for _, fd := range w.WaitFDs() {
			if err := d.add(fd, fdSource); err != nil {
				d.close()
				return nil, err
			}
		}
		d.waitable = true
	}
	return d, nil
}

func (d *idler) add(fd int, kind int32) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd), Pad: kind}
	if err := unix.EpollCtl(d.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("nic: idle: add fd %d: %w", fd, os.NewSyscallError("epoll_ctl", err))
	}
	return nil
}

func (d *idler) close() {
	unix.Close(d.ctl)
	unix.Close(d.ep)
}

// addTenant puts t's doorbells into the set.
func (d *idler) addTenant(t *Tenant) {
	for _, fd := range t.wake {
		d.add(fd, fdDoorbell) // a bad fd only loses that tenant its doorbell
	}
}

// removeTenant takes t's doorbells out of the set (before the daemon
// closes them).
func (d *idler) removeTenant(t *Tenant) {
	for _, fd := range t.wake {
		unix.EpollCtl(d.ep, unix.EPOLL_CTL_DEL, fd, nil)
	}
}

// kick wakes a sleeping engine. It never blocks: the eventfd is vnicd's
// own, non-blocking, and a full counter already means "wake up".
func (d *idler) kick() {
	one := [8]byte{1}
	unix.Write(d.ctl, one[:])
}

// wait sleeps until a descriptor of the set is readable or timeout passes,
// then drains what woke it: the control eventfd and the doorbells. A
// doorbell at end of file (the tenant closed or shut down its end) leaves
// the set, so that a tenant cannot keep the engine awake that way.
func (d *idler) wait(timeout time.Duration, c *idleCounters) {
	var n int
	var err error
	if timeout >= time.Millisecond {
		n, err = unix.EpollWait(d.ep, d.events[:], int(timeout/time.Millisecond))
	} else {
		// Sub-millisecond: ppoll on the epoll descriptor (an hrtimer, not
		// Go's timers), then collect the events without blocking.
		ts := unix.NsecToTimespec(int64(timeout))
		fds := [1]unix.PollFd{{Fd: int32(d.ep), Events: unix.POLLIN}}
		if k, _ := unix.Ppoll(fds[:], &ts, nil); k > 0 {
			n, err = unix.EpollWait(d.ep, d.events[:], 0)
		}
	}
	if err != nil {
		return // EINTR: the caller looks at everything anyway
	}
	for _, ev := range d.events[:n] {
		switch ev.Pad {
		case fdControl:
			unix.Read(d.ctl, d.buf[:8])
		case fdDoorbell:
			c.doorbells.Add(1)
			d.drain(int(ev.Fd))
		}
	}
}

// nap sleeps for d on a timer: the coalescing delay (Config.RxCoalesce).
// Only the control eventfd (a tenant change, Run's context) cuts it short;
// frames and doorbells wait for the timer, which is the point.
//
// The ppoll is a raw system call: Go's runtime does not see the thread
// block. With an ordinary one, every nap longer than sysmon's tick (20 µs)
// made sysmon take the P away and wake another thread for it (handoffp,
// startm), which found nothing and slept again, and kept sysmon itself
// polling every 20 µs: measured in vnicd at 1 ms naps, that runtime churn
// was 64% of its CPU and the engine's own work 4%. The nap is bounded
// (RxCoalesceMax, at most 10 ms), the thread is locked to the engine, and
// a preemption signal ends the ppoll with EINTR, so the garbage collector
// still stops the engine within one signal.
func (d *idler) nap(dur time.Duration) {
	ts := unix.NsecToTimespec(int64(dur))
	fds := [1]unix.PollFd{{Fd: int32(d.ctl), Events: unix.POLLIN}}
	k, _, _ := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if int(k) > 0 {
		unix.Read(d.ctl, d.buf[:8])
	}
}

// drain empties a doorbell. MSG_DONTWAIT makes each call non-blocking
// whatever the descriptor's flags (vnicd's end is its own, non-blocking
// already; the tenant holds only the other end). At most a few reads: a
// tenant that rings without pause costs the engine one read per wake-up.
func (d *idler) drain(fd int) {
	for i := 0; i < 4; i++ {
		k, _, err := unix.Recvfrom(fd, d.buf[:], unix.MSG_DONTWAIT)
		if k > 0 && k < len(d.buf) {
			return
		}
		if k > 0 {
			continue
		}
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			return
		}
		// End of file or an error: the tenant closed its end. Stop
		// watching it; the control connection detaches the tenant.
		unix.EpollCtl(d.ep, unix.EPOLL_CTL_DEL, fd, nil)
		return
	}
}

// wakeQueue sends one byte on queue q's socket: the tenant's end becomes
// readable. MSG_DONTWAIT: this never blocks, whatever the tenant does to
// its own end (its end is another socket with its own flags, unlike a
// shared eventfd). A full buffer means an unread wake-up is pending: fine.
// MSG_NOSIGNAL: a closed peer is EPIPE, not SIGPIPE.
//
// The sendto is a raw system call: it never blocks (MSG_DONTWAIT), but
// waking the tenant's thread on another CPU takes tens of µs on a small VM
// (an IPI), long enough for Go's sysmon to take the engine's P away
// mid-call and wake another thread for it, as it did for the naps.
func (t *Tenant) wakeQueue(q int) {
	one := [1]byte{1}
	_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(t.wake[q]), uintptr(unsafe.Pointer(&one[0])), 1,
		unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, 0, 0)
	if errno != 0 {
		t.idle.refused.Add(1)
		return
	}
	t.idle.signals.Add(1)
}
