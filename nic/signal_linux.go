//go:build linux

package nic

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/futex"
)

// slowSignal is the CPU time above which one wake of a tenant's signal word
// counts as slow: an honest wake costs a few µs. A tenant makes its wake
// slow by loading the futex hash bucket of its word (requeueing thousands
// of waiters in a loop holds the bucket's lock for milliseconds).
const slowSignal = 200 * time.Microsecond

// slowPenalty is how many times a slow wake's CPU time the signaller then
// waits before it wakes that tenant again (at most maxPenalty): it spends
// at most a tenth of a CPU on a tenant whose wakes are slow, whatever the
// tenant does. The tenant's cores, which sleep with a timeout, only wake
// later: the cost of the attack is the attacker's.
const (
	slowPenalty = 9
	maxPenalty  = time.Second
)

// signaller wakes one tenant's sleeping cores on the engine's behalf. The
// engine's thread never makes a system call on anything the tenant can
// reach: a FUTEX_WAKE on a word in the tenant's region walks a bucket of
// the kernel's shared futex hash, which the tenant can fill with waiters
// or hold locked, and a write to a descriptor it holds wakes whatever it
// hung there. The engine stores the generation into the queue's signal
// word (a store to the region, as every post is), marks the queue due, and
// wakes the signaller through a word of vnicd's own (FUTEX_WAKE_PRIVATE,
// only when the signaller sleeps): a private futex lives in vnicd's
// private futex hash (Linux 6.16, CONFIG_FUTEX_PRIVATE_HASH), where no
// tenant can park a waiter. The signaller, on a thread of its own, makes
// the shared FUTEX_WAKE; it measures each one's CPU time and backs off a
// tenant whose wakes are slow (slowPenalty), counting them.
//
// A tenant that asked for receive interrupts (TenantConfig.Interrupts)
// is woken by one byte written to the queue's pipe instead of the
// FUTEX_WAKE: its cores wait in their runtime's poller. The write end is
// vnicd's own non-blocking open file, so a full pipe (a tenant that never
// reads) costs one failed write; a tenant that hangs waiters on its read
// end makes the write slow, which the same back-off answers.
//
// One signaller per tenant: a tenant that makes its own wakes slow delays
// only its own.
type signaller struct {
	signal []*uint32     // the tenant's signal words (in its region)
	irq    []int         // per queue: the interrupt pipe's write end (nil: futex)
	due    []atomic.Bool // per queue: a wake to make
	word   atomic.Uint32 // the signaller's futex: bumped to wake it
	asleep atomic.Bool   // it sleeps (or is about to) on word
	stop   atomic.Bool   // close asked it to return
	done   chan struct{} // closed when it has returned
	slow   atomic.Uint64 // slow wakes (this tenant's)
	cnt    *idleCounters // the engine's
}

func newSignaller(signal []*uint32, irq []int, cnt *idleCounters) *signaller {
	s := &signaller{signal: signal, irq: irq, due: make([]atomic.Bool, len(signal)), done: make(chan struct{}), cnt: cnt}
	go s.run()
	return s
}

// post asks for queue q's wake. Engine goroutine; it never blocks.
func (s *signaller) post(q int) {
	s.due[q].Store(true)
	if s.asleep.Load() && s.asleep.Swap(false) {
		s.word.Add(1)
		futex.WakePrivate(s.wordAddr(), 1)
	}
}

func (s *signaller) wordAddr() *uint32 { return (*uint32)(unsafe.Pointer(&s.word)) }

// close stops the signaller and returns once it has: it touches the
// region no more. Not on the engine goroutine (it waits for a wake that
// may spin in the kernel).
func (s *signaller) close() {
	if s == nil {
		return
	}
	s.stop.Store(true)
	s.word.Add(1)
	futex.WakePrivate(s.wordAddr(), 1)
	<-s.done
}

func (s *signaller) anyDue() bool {
	for i := range s.due {
		if s.due[i].Load() {
			return true
		}
	}
	return false
}

func (s *signaller) run() {
	// A thread of its own, so that the thread CPU clock measures its
	// wakes; it exits with the goroutine (never unlocked).
	runtime.LockOSThread()
	defer close(s.done)
	raisePriority()
	for {
		v := s.word.Load()
		s.asleep.Store(true)
		if !s.anyDue() && !s.stop.Load() {
			futex.WaitPrivate(s.wordAddr(), v, 0)
		}
		s.asleep.Store(false)
		if s.stop.Load() {
			return
		}
		for q := range s.due {
			if !s.due[q].Load() || !s.due[q].Swap(false) {
				continue
			}
			c0 := threadCPUTime()
			err := s.wake(q)
			spent := threadCPUTime() - c0
			if err != nil {
				s.cnt.refused.Add(1)
			}
			if spent > slowSignal {
				s.slow.Add(1)
				s.cnt.slow.Add(1)
				s.pause(min(slowPenalty*spent, maxPenalty))
				if s.stop.Load() {
					return
				}
			}
		}
	}
}

// wake makes queue q's wake: a byte into its interrupt pipe, or one
// FUTEX_WAKE on its signal word. A full pipe is no error: a wake is
// pending there already.
func (s *signaller) wake(q int) error {
	if s.irq == nil {
		_, err := futex.WakeSyscall(s.signal[q], 1)
		return err
	}
	one := [1]byte{1}
	_, err := unix.Write(s.irq[q], one[:])
	if err == unix.EAGAIN {
		return nil
	}
	return err
}

// pause waits d, or until close.
func (s *signaller) pause(d time.Duration) {
	for end := time.Now().Add(d); !s.stop.Load(); {
		left := time.Until(end)
		if left <= 0 {
			return
		}
		futex.WaitPrivate(s.wordAddr(), s.word.Load(), left)
	}
}

// signalBoost is how many nice levels a signalling thread runs above the
// process: on the engine's CPU the woken thread then preempts the polling
// engine at once instead of waiting for the engine's slice to end.
const signalBoost = 10

// raisePriority raises the calling thread's priority by signalBoost nice
// levels, where the process may (CAP_SYS_NICE); else it leaves it.
func raisePriority() {
	tid := unix.Gettid()
	// getpriority returns 20 - nice.
	cur, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return
	}
	unix.Setpriority(unix.PRIO_PROCESS, tid, max(20-cur-signalBoost, -20))
}

// threadCPUTime is the calling thread's CPU time.
func threadCPUTime() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
