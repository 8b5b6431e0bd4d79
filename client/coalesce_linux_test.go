package client

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/futex"
	"github.com/vnic/vnic/shm"
)

// napQueue is a local tenant's queue wired as an attached one is (see
// sigQueue), napping coalesce at a time; it returns the queue and vnicd's
// signal.
func napQueue(t *testing.T, coalesce time.Duration) (*Queue, func(gen uint32)) {
	t.Helper()
	q, _, vnicd := sigQueue(t, time.Microsecond)
	q.coalesce = coalesce
	return q, vnicd
}

// sigQueue is a local tenant's queue (one queue, Ax 8, Bx 16) wired as an
// attached one is: a doorbell eventfd, its need-wakeup, signal and
// engine-sleeping words, spinning spin before it sleeps. It returns the
// queue, its region and vnicd's signal: store the generation into the
// queue's signal word and wake one waiter, as the engine does.
func sigQueue(t *testing.T, spin time.Duration) (*Queue, *shm.Region, func(gen uint32)) {
	t.Helper()
	g := shm.Queues(1, 8, 16, 8, 2048, 32)
	words := make([]uint64, g.Layout().Total/8+1)
	r, err := shm.Format(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), g.Layout().Total), g, 0)
	if err != nil {
		t.Fatal(err)
	}
	ten, err := Local(r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := ten.Queue(0)
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	q.wake = os.NewFile(uintptr(efd), "doorbell")
	t.Cleanup(func() { q.wake.Close() })
	q.wfd = efd
	q.gone = new(atomic.Bool)
	q.needWake = r.NeedWakeup(0)
	q.signal = r.Signal(0)
	q.engSleep = r.EngineSleeping()
	q.spin = spin
	signal := func(gen uint32) {
		atomic.StoreUint32(r.Signal(0), gen)
		futex.Wake(r.Signal(0), 1)
	}
	return q, r, signal
}

// irqQueue is sigQueue with a receive interrupt, as vnicd gives a tenant
// that asks for them: the signal stores the word and writes a byte into
// the pipe (vnicd's end non-blocking, as vnicd's is).
func irqQueue(t *testing.T, spin time.Duration) (*Queue, *shm.Region, func(gen uint32)) {
	t.Helper()
	q, r, _ := sigQueue(t, spin)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	q.setIRQ(os.NewFile(uintptr(p[0]), "interrupt"))
	if q.irq == nil {
		t.Fatal("the pipe's read end offers no raw access")
	}
	w := os.NewFile(uintptr(p[1]), "interrupt-w")
	t.Cleanup(func() { q.irq.Close(); w.Close() })
	signal := func(gen uint32) {
		atomic.StoreUint32(r.Signal(0), gen)
		if _, err := w.Write([]byte{1}); err != nil && !errors.Is(err, unix.EAGAIN) {
			t.Errorf("interrupt: %v", err)
		}
	}
	return q, r, signal
}

// TestNapWaitWord: while a queue naps it publishes its generation with
// napBit (vnicd then signals it only when its Ax ring runs low), a new
// generation per nap, never 0 and never napBit alone; it clears the word
// when it stops napping; a signal cuts the nap short and is counted as
// Urgent; and napping allocates nothing.
func TestNapWaitWord(t *testing.T) {
	q, vnicd := napQueue(t, 20*time.Millisecond)
	// The deadline never ends this wait (a loaded run may take longer than
	// any napping deadline to see the word): the watcher ends it, by
	// cancelling its context once the queue naps on after the signal.
	q.spin = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan [2]uint32, 1)
	go func() {
		defer cancel() // whatever happens, napWait returns
		var w uint32
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Microsecond) {
			now := atomic.LoadUint32(q.needWake)
			if w == 0 && now != 0 {
				w = now
				// vnicd's urgent signal: it ends this nap (counted as
				// Urgent); with nothing posted the queue naps on.
				vnicd(now)
				continue
			}
			if w != 0 && now != 0 && now != w {
				seen <- [2]uint32{w, now} // napping on, with a new generation
				return
			}
		}
		seen <- [2]uint32{w, 0}
	}()
	t0 := time.Now()
	ready, err := q.napWait(ctx)
	el := time.Since(t0)
	ws := <-seen
	if !errors.Is(err, context.Canceled) || ready {
		t.Fatalf("napWait = %v, %v with nothing posted, want false, context.Canceled (words seen %#x)", ready, err, ws)
	}
	for i, w := range ws {
		if w&napBit == 0 || w&^napBit == 0 {
			t.Errorf("napping word %d: %#x, want a generation with napBit", i, w)
		}
	}
	if got := atomic.LoadUint32(q.needWake); got != 0 {
		t.Errorf("word %#x after napWait returned, want 0 (polling)", got)
	}
	st := q.WaitStats()
	if st.Urgent < 1 || st.Naps < 2 {
		t.Errorf("wait stats %+v: want an urgent wake-up and the naps after it", st)
	}
	t.Logf("napWait returned after %v; %+v", el, st)

	q.coalesce, q.spin = 2*time.Microsecond, time.Microsecond
	if a := testing.AllocsPerRun(50, func() {
		if _, err := q.napWait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("napWait allocates %v times per call, want 0", a)
	}
	for g, i := q.gen, 0; i < 3; i++ {
		if n := q.nextGen(); n == 0 || n&napBit != 0 || n == g {
			t.Fatalf("nextGen after %#x = %#x", g, n)
		}
		g = q.gen
	}
	q.gen = napBit - 1
	if n := q.nextGen(); n != 1 {
		t.Errorf("nextGen wraps to %#x, want 1", n)
	}
}
