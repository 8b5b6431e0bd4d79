package fabric_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/fabric"
)

// hostFrames is 64-byte UDP frames from 198.18.0.1 to 198.18.0.2 on n
// flows.
func hostFrames(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = frame("198.18.0.1", "198.18.0.2", uint16(1000+i), 9000, 18) // 14+20+8+18 = 60, padded to 64 below
		out[i] = append(out[i], 0, 0, 0, 0)
	}
	return out
}

// BenchmarkHostToHost measures the engine's side of host-to-host
// delivery: TxStep over a sender whose TX rings are kept full, the fabric,
// and the receive path into the receiver's rings, timed alone on the
// thread's CPU clock (what a loaded machine's other processes take is not
// counted); the sender and the receiver run between passes, untimed, on
// the same thread. It reports the engine's frames per CPU-second (Mpps).
func BenchmarkHostToHost(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  fabric.Config
	}{
		{"plain", fabric.Config{}},
		// Every limit on, none binding: the model's cost.
		{"limits", fabric.Config{FlowPps: 1e12, DPUs: 16, DPUPps: 1e12, NICBps: 1e15, Loss: 1e-9, Seed: 1}},
	} {
		b.Run(c.name, func(b *testing.B) { hostToHost(b, c.cfg) })
	}
}

func hostToHost(b *testing.B, cfg fabric.Config) {
	r := newRig(b, cfg, nic.Drop)
	a := r.addHost("198.18.0.1", 2, 0, nil)
	dst := r.addHost("198.18.0.2", 2, 0, nil)
	frames := hostFrames(64)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var engine int64
	moved := 0
	b.ReportAllocs()
	b.ResetTimer()
	for moved < b.N {
		for q := 0; q < a.cl.Queues(); q++ {
			a.cl.Queue(q).Send(frames[q*32 : q*32+32])
		}
		r.now += 6400 // 64 frames at 10 Mpps
		t0 := threadCPU()
		moved += r.eng.TxStep()
		if moved%1024 < 64 {
			r.eng.Step(nil) // Run folds when the wire is idle, or every 16 batches
		}
		engine += threadCPU() - t0
		for q := 0; q < dst.cl.Queues(); q++ {
			r.pkts, _ = dst.cl.Queue(q).Recv(r.pkts[:0])
			dst.cl.Queue(q).Release(r.pkts)
		}
	}
	b.StopTimer()
	if got := r.ledger(dst).Get(fabric.Received); got < uint64(moved)*9/10 {
		b.Fatalf("received %d of %d frames", got, moved)
	}
	b.ReportMetric(float64(moved)/(float64(engine)/1e9)/1e6, "engine-Mpps")
}

// BenchmarkHostToHostThreads runs the engine on its own thread (Run) and
// the tenants on another (the sender keeping its TX rings full, the
// receiver draining), and reports the frames per second the receiver got.
func BenchmarkHostToHostThreads(b *testing.B) {
	r := newRig(b, fabric.Config{}, nic.Drop)
	eng, err := nic.New(nic.Config{Model: nic.RxBisect, EmulatorCPU: -1, Idle: nic.IdleBusy, Tx: r.fab})
	if err != nil {
		b.Fatal(err)
	}
	r.eng = eng
	a := r.addHost("198.18.0.1", 2, 0, nil)
	dst := r.addHost("198.18.0.2", 2, 0, nil)
	frames := hostFrames(64)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); eng.Run(ctx, r.fab.Source()) }()
	<-eng.Started()
	var got atomic.Int64
	stop := make(chan struct{})
	// The sender and the receiver share one thread (this machine may have
	// two CPUs: one for the engine, one for both tenants).
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		pk := make([]client.Packet, 0, 64)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for q := 0; q < a.cl.Queues(); q++ {
				a.cl.Queue(q).Send(frames[:32])
			}
			for q := 0; q < dst.cl.Queues(); q++ {
				pk, _ = dst.cl.Queue(q).Recv(pk[:0])
				dst.cl.Queue(q).Release(pk)
				got.Add(int64(len(pk)))
			}
		}
	}()
	b.ResetTimer()
	t0 := time.Now()
	for got.Load() < int64(b.N) && time.Since(t0) < 30*time.Second {
		time.Sleep(time.Millisecond)
	}
	el := time.Since(t0)
	b.StopTimer()
	close(stop)
	cancel()
	wg.Wait()
	b.ReportMetric(float64(got.Load())/el.Seconds()/1e6, "Mpps")
}
