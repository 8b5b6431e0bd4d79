package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/shm"
)

// TestWaitLateSignal plays vnicd's side of the need-wakeup handshake by
// its rule (post, then load the word; signal a generation at most once)
// with vnicd's load delayed, as when its thread is preempted between the
// two: the signal meant for an entry the queue has already received
// lands on the next Wait's generation and wakes it for nothing. That Wait
// must publish a new generation before it sleeps again, or vnicd, finding
// the generation signalled, sends nothing for the next entry and the
// queue sleeps until the poll's safety timeout (a lost wake-up, and
// drops in make demo under load).
//
// It runs with both ways of sleeping: on the futex word and on the
// queue's receive interrupt.
func TestWaitLateSignal(t *testing.T) {
	t.Run("futex", func(t *testing.T) { testWaitLateSignal(t, sigQueue) })
	t.Run("interrupt", func(t *testing.T) { testWaitLateSignal(t, irqQueue) })
}

func testWaitLateSignal(t *testing.T, mk func(*testing.T, time.Duration) (*Queue, *shm.Region, func(uint32))) {
	q, r, vnicd := mk(t, 10*time.Microsecond)

	post := poster(t, r) // vnicd's side
	var signalled uint32
	kick := func() {
		if gen := atomic.LoadUint32(q.needWake); gen != 0 && gen != signalled {
			signalled = gen
			vnicd(gen)
		}
	}
	sleeping := func(not uint32) uint32 {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
			if gen := atomic.LoadUint32(q.needWake); gen != 0 && gen != not {
				return gen
			}
		}
		t.Fatal("the queue did not go to sleep")
		return 0
	}
	wait := func() chan error {
		done := make(chan error, 1)
		go func() { done <- q.Wait(context.Background()) }()
		return done
	}

	// vnicd posts E1 and is preempted before it loads the word; Wait A
	// finds E1 itself and returns.
	post()
	done := wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	takeAll(t, q)
	// Wait B sleeps with a new generation; vnicd's late load sees it and
	// signals it for E1: B wakes and finds nothing.
	done = wait()
	gen := sleeping(0)
	kick()
	// B goes back to sleep, and it must do so under a new generation:
	// vnicd signals each generation once. (Waiting for the word rather
	// than a fixed 50 ms keeps a loaded -race run from posting E2 before
	// B has gone back to sleep.)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Microsecond) {
		select {
		case err := <-done:
			t.Fatalf("Wait returned %v with nothing to receive", err)
		default:
		}
		if g := atomic.LoadUint32(q.needWake); g != 0 && g != gen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a spurious wake-up Wait still sleeps under generation %d, which vnicd has already signalled: the next frame's wake-up would be lost (%+v)", gen, q.WaitStats())
		}
	}
	// vnicd posts E2 and loads the word: it must find a generation it has
	// not signalled yet.
	post()
	kick()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Wait did not return 5s after E2 was posted (%+v)", q.WaitStats())
	}
	// A lost wake-up for E2 shows as a timeout: B then slept until its
	// waitPoll safety timeout, which TimedOut counts (how long Wait took
	// is not asserted: a loaded run may take long to schedule B).
	// The first kick woke B with nothing posted; whether B counts that
	// wake as spurious depends on whether E2 was posted before B looked
	// again (B publishes its new generation first, and the test posts E2
	// as soon as it sees it), so only the timeout is asserted.
	if st := q.WaitStats(); st.TimedOut != 0 || st.Spurious+st.Signalled == 0 {
		t.Errorf("wait counters %+v: want a wake by signal and no timeout (a timeout: E2's wake-up was lost, vnicd found generation %d already signalled)", st, gen)
	}
}

// TestStaleKickIsNoTimeout: a kick that lands after the Wait it was meant
// for returned (a cancelled context's, say) leaves the receive
// interrupt's deadline in the past. The next Wait's sleep then returns at
// once: that is a sleep cut short, not the safety net's timeout, which
// would count a lost wake-up and stretch the next safety net eightfold.
func TestStaleKickIsNoTimeout(t *testing.T) {
	q, r, vnicd := irqQueue(t, time.Microsecond)
	post := poster(t, r)
	var signalled uint32
	deliver := func() { // wait for the sleep, then post and signal it
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Microsecond) {
			if gen := atomic.LoadUint32(q.needWake); gen != 0 && gen != signalled {
				signalled = gen
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the queue did not go to sleep")
			}
		}
		post()
		vnicd(signalled)
	}
	round := func() {
		done := make(chan error, 1)
		go func() { done <- q.Wait(context.Background()) }()
		deliver()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		takeAll(t, q)
	}
	round()  // sets the interrupt's read deadline, which the next sleeps keep
	q.kick() // late: no Wait runs
	woke, err := q.sleepIRQ(context.Background(), waitPoll)
	if err != nil || !woke {
		t.Fatalf("the sleep after a stale kick returned woken=%v, %v; want woken (cut short), not the safety net's timeout", woke, err)
	}
	round() // and the queue still sleeps and wakes
	if st := q.WaitStats(); st.TimedOut != 0 {
		t.Errorf("wait counters %+v: a timeout counted", st)
	}
}

// takeAll receives what q holds and releases it.
func takeAll(t *testing.T, q *Queue) {
	t.Helper()
	pk, err := q.Recv(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Release(pk); err != nil {
		t.Fatal(err)
	}
}

// poster plays vnicd's receive side on queue 0 of r: each call takes an
// Ax buffer and posts a 60-byte entry in the Bx ring.
func poster(t *testing.T, r *shm.Region) func() {
	t.Helper()
	g := r.Geo
	axn, err := ax.NewNIC(r.AxMem(0), int(g.AxSize), g.BufCount)
	if err != nil {
		t.Fatal(err)
	}
	bxn, err := bx.NewNIC(r.BxMem(0), int(g.BxSize))
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		b, i, ok, err := axn.Take()
		if !ok || err != nil {
			t.Fatalf("no Ax buffer to post: %v", err)
		}
		if ok, err := bxn.Stage(&bx.Entry{Buf: b, Len: 60, AxIdx: uint32(i)}); !ok || err != nil {
			t.Fatalf("stage: %v", err)
		}
		bxn.Flush()
	}
}
