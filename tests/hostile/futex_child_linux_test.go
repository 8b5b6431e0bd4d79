package hostile

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/testutil/futexload"
)

// futexAbuse attaches a single-queue tenant and loads the kernel's futex
// hash against vnicd's signals, without a thread per waiter (io_uring
// futex waits). With p.N > 0 it parks p.N waiters on its own signal word
// and, until stopped, requeues them all between that word and another in a
// loop (FUTEX_CMP_REQUEUE holds both words' hash buckets for milliseconds),
// re-parking the ones vnicd's signals wake. With p.Repeat > 0 it parks
// p.Repeat waiters over 1,000 words of its own memory, which lengthen
// every bucket of the shared hash. Either way it publishes a new
// need-wakeup generation on every batch it receives, so that vnicd signals
// it all the time.
func futexAbuse(sock string, p params) (string, func() string) {
	t0 := time.Now()
	ten, err := client.Attach(context.Background(), sock, p.Attach)
	if err != nil {
		return "attach: " + err.Error(), func() string { return "" }
	}
	sig, need := ten.Region.Signal(0), ten.Region.NeedWakeup(0)
	var parked []*futexload.Waiters
	closeAll := func() {
		for _, w := range parked {
			w.Close()
		}
	}
	if p.N > 0 {
		w, err := futexload.Park([]*uint32{sig}, p.N, true)
		if err != nil {
			ten.Close()
			return "park on the signal word: " + err.Error(), func() string { return "" }
		}
		parked = append(parked, w)
	}
	if p.Repeat > 0 {
		words := make([]uint32, 1000)
		ptrs := make([]*uint32, len(words))
		for i := range words {
			ptrs[i] = &words[i]
		}
		w, err := futexload.Park(ptrs, p.Repeat/len(words), true)
		if err != nil {
			closeAll()
			ten.Close()
			return "park foreign waiters: " + err.Error(), func() string { return "" }
		}
		parked = append(parked, w)
		runtime.KeepAlive(words)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var got, loops, rearmed atomic.Int64
	other := new(uint32)
	if p.N > 0 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			loops.Add(int64(futexload.RequeueStorm(sig, other, &stop)))
		}()
		go func() { // vnicd's signals wake one waiter each: park them again
			defer wg.Done()
			for !stop.Load() {
				n, _ := parked[0].Rearm()
				rearmed.Add(int64(n))
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Add(1)
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
	n := 0
	for _, w := range parked {
		n += w.Parked()
	}
	return fmt.Sprintf("%d io_uring futex waiters parked (%d on the signal word), ready after %v", n, p.N, time.Since(t0).Round(time.Millisecond)), func() string {
		stop.Store(true)
		wg.Wait()
		closeAll()
		ten.Close()
		return fmt.Sprintf("%d frames received, %d requeue round trips, %d waiters parked again", got.Load(), loops.Load(), rearmed.Load())
	}
}
