package client

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// A queue's Waker ends its Wait, whether the Wait sleeps on the futex or
// in the netpoller: a Wake while it sleeps, and one that came after Arm
// but before the Wait began; a Wake while disarmed does nothing; and a
// sleep ended by a Wake allocates nothing.
func TestWakerEndsWait(t *testing.T) {
	for _, kind := range []string{"futex", "interrupt"} {
		t.Run(kind, func(t *testing.T) {
			var q *Queue
			if kind == "futex" {
				q, _, _ = sigQueue(t, time.Microsecond)
			} else {
				q, _, _ = irqQueue(t, time.Microsecond)
			}
			w := q.Waker()
			wait := func() {
				t.Helper()
				done := make(chan error, 1)
				go func() { done <- q.Wait(context.Background()) }()
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("Wait ended by the Waker: %v, want nil", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("Wait still asleep 10 s after the Wake")
				}
			}

			// A Wake before the Wait begins: it returns at once.
			w.Arm()
			w.Wake()
			if !w.Fired() {
				t.Fatal("Fired is false after a Wake of an armed Waker")
			}
			wait()
			w.Disarm()

			// A Wake while disarmed is forgotten.
			w.Wake()
			w.Arm()
			if w.Fired() {
				t.Fatal("a Wake while disarmed fired the next Arm")
			}

			// A Wake while the Wait sleeps (its generation published).
			go func() {
				for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Microsecond) {
					if atomic.LoadUint32(q.needWake) != 0 {
						w.Wake()
						return
					}
				}
			}()
			wait()
			if st := q.WaitStats(); st.Sleeps == 0 {
				t.Fatalf("the Wait never slept: %+v", st)
			}
			w.Disarm()

			// Sleeps ended by a Wake allocate nothing (the waker goroutine
			// wakes whatever sleep it finds armed).
			var stop atomic.Bool
			defer stop.Store(true)
			go func() {
				for !stop.Load() {
					if atomic.LoadUint32(q.needWake) != 0 {
						w.Wake()
					}
					runtime.Gosched()
				}
			}()
			round := func() {
				w.Arm()
				if err := q.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
				w.Disarm()
			}
			round()
			before := q.WaitStats().Sleeps
			if a := testing.AllocsPerRun(50, round); a != 0 && !raceEnabled {
				t.Errorf("%v allocations per sleep ended by a Wake, want 0", a)
			}
			if q.WaitStats().Sleeps == before {
				t.Error("the measured Waits never slept")
			}
		})
	}
}
