//go:build linux

package nic

import (
	"fmt"
	"os"
	"sync/atomic"
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
// RemoveTenant, Run's context) and every tenant's TX doorbells (eventfds
// the tenants hold copies of, watched edge-triggered and never read).
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
	return d.addEvents(fd, kind, unix.EPOLLIN)
}

func (d *idler) addEvents(fd int, kind int32, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd), Pad: kind}
	if err := unix.EpollCtl(d.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("nic: idle: add fd %d: %w", fd, os.NewSyscallError("epoll_ctl", err))
	}
	return nil
}

func (d *idler) close() {
	unix.Close(d.ctl)
	unix.Close(d.ep)
}

// addTenant puts t's doorbells into the set, edge-triggered: every write
// of the tenant's is one edge, so the engine never reads the eventfd to
// re-arm it. Reading would be paid by the engine: the read wakes every
// waiter the tenant hung on its copy (its writers' wait queue is the same),
// and the tenant can hang thousands. The counter is the tenant's own
// business: at its ceiling only the tenant's next ring fails.
func (d *idler) addTenant(t *Tenant) {
	for _, fd := range t.wake {
		d.addEvents(fd, fdDoorbell, unix.EPOLLIN|unix.EPOLLET) // a bad fd only loses that tenant its doorbell
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
// then drains the control eventfd if it woke it. Doorbells are counted,
// not read (see addTenant).
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

// wakeQueue signals queue q: it stores the generation g in the queue's
// signal word and hands the wake to the tenant's signaller (signal_linux.go),
// which makes the FUTEX_WAKE on the word. The tenant's core sleeps in
// FUTEX_WAIT on the word with the value it loaded before its last look at
// the ring, so either the wait sees the new value and returns at once, or
// it is woken.
func (t *Tenant) wakeQueue(q int, g uint32) {
	atomic.StoreUint32(t.signal[q], g) // untrusted word: the tenant may overwrite it, and only its own wake-up suffers
	t.idle.signals.Add(1)
	t.sig.post(q)
}
