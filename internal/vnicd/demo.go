package vnicd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/affinity"
	"github.com/vnic/vnic/internal/conserve"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
	"github.com/vnic/vnic/wire/synth"
)

// Demo is vnicd demo's configuration: one in-process tenant, fed by the
// synthetic source, consumed on its own thread; no control socket.
type Demo struct {
	Rings
	Engine      nic.Config   // model, policy, key, timing and the emulator's CPU
	Synth       synth.Config // with the tenant's queues
	ConsumerCPU int          // -1: unpinned
	Conserve    bool         // check every buffer move (slow)
	Report      time.Duration
	Out         io.Writer // the interval reports' and final counters' table
	Log         zerolog.Logger
}

// RunDemo runs the demo until ctx ends, then prints the final counters.
func RunDemo(ctx context.Context, d Demo) error {
	log := d.Log
	ecpu, ccpu := d.Engine.EmulatorCPU, d.ConsumerCPU
	for _, cpu := range []int{ecpu, ccpu} {
		if cpu >= runtime.NumCPU() {
			return fmt.Errorf("CPU %d does not exist (this machine has %d); pick one below %d or use -1", cpu, runtime.NumCPU(), runtime.NumCPU())
		}
	}
	q := d.Queues
	bxSize, err := d.Bx()
	if err != nil {
		return err
	}
	axSize := d.Ax(bxSize)
	bufs := d.DemoBuffers(axSize, bxSize)
	model := d.Engine.Model
	geo := shm.Queues(q, axSize, bxSize, 64, d.BufSize, bufs)
	geo.Model = uint32(model)
	if err := geo.Validate(); err != nil {
		return fmt.Errorf("ring geometry: %w", err)
	}
	region, err := shm.Create(geo, shm.Options{Name: "vnic-demo", Log: func(msg string, err error) { log.Info().Err(err).Msg(msg) }})
	if err != nil {
		return fmt.Errorf("create the tenant region: %w", err)
	}
	defer region.Close()
	ecfg := d.Engine
	ecfg.OnFault = func(t *nic.Tenant, err error) {
		log.Error().Err(err).Str("tenant", t.Name).Msg("tenant wrote corrupt ring state; detaching it")
	}
	eng, err := nic.New(ecfg)
	if err != nil {
		return err
	}
	var check *conserve.Checker
	if d.Conserve {
		check = conserve.New(bufs, conserve.Allocator)
	}
	ten, err := eng.AddTenant(nic.TenantConfig{ID: 1, Name: "demo", Match: nic.Match{Default: true}, Checker: check}, region)
	if err != nil {
		return err
	}
	cl, err := client.Local(region, client.Options{Checker: check})
	if err != nil {
		return err
	}
	hasher, _ := rss.NewHasher(d.Engine.Key)
	sc := d.Synth
	gen, err := synth.New(sc, func(f synth.Flow) int {
		t, _ := rss.NewTuple(rss.ProtoUDP, f.Src, f.Dst, f.SrcPort, f.DstPort)
		return ten.RETA().Queue(hasher.HashTuple(&t))
	})
	if err != nil {
		return err
	}
	log.Info().Str("model", model.String()).Str("policy", d.Engine.Policy.String()).Int("queues", q).
		Int("ax_size", axSize).Int("bx_size", bxSize).Int("buffers", bufs).Bool("huge_pages", region.Huge).
		Int("emulator_cpu", ecpu).Str("source", "synth").Int("frame_size", sc.FrameSize).
		Msg("vnicd running with in-process demo consumers (synthetic traffic)")

	// The consumers and the report stop when the engine does, for
	// whatever reason (ctx, or an error such as a CPU it cannot take).
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		consume(cctx, cl, ccpu, log)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		report(cctx, region, d.Report, log)
	}()
	err = daemon.FlagHint(eng.Run(ctx, nic.SourceFunc(func(dst [][]byte) ([][]byte, error) { return gen.Next(dst), nil })))
	stop()
	wg.Wait()
	eng.Fold()
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// Cancelled (vnicd demo: interrupted): no report, the cause.
		return context.Cause(ctx)
	}
	fmt.Fprintf(d.Out, "\nfinal counters (model %s, %d queues, Ax %d, Bx %d, %d buffers):\n", model, q, axSize, bxSize, bufs)
	printRings(d.Out, region)
	if check != nil {
		n, first := check.Violations()
		fmt.Fprintf(d.Out, "conservation: %d violations; buffers by place %v\n", n, check.Count())
		if n != 0 {
			return fmt.Errorf("buffer conservation violated %d times, first: %v", n, first)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// consume runs Listing 1 for every queue on one pinned thread.
func consume(ctx context.Context, cl *client.Tenant, cpu int, log zerolog.Logger) {
	if cpu >= 0 {
		unpin, err := affinity.Pin(cpu)
		if err != nil {
			log.Warn().Err(err).Msg("--consumer-cpu: the demo consumers run unpinned")
		}
		defer unpin()
	}
	pk := make([]client.Packet, 0, 32)
	for i := 0; ctx.Err() == nil; i++ {
		got := 0
		for q := 0; q < cl.Queues(); q++ {
			pk, _ = cl.Queue(q).Recv(pk[:0])
			got += len(pk)
			cl.Queue(q).Release(pk)
		}
		if got == 0 && i%1024 == 0 {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// report logs the frame rate and the drops of each interval.
func report(ctx context.Context, r *shm.Region, every time.Duration, log zerolog.Logger) {
	if every <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	prev := make([]counters.Snapshot, r.Geo.NumBx)
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			secs := now.Sub(last).Seconds()
			last = now
			var tot counters.Snapshot
			for q := range prev {
				s := r.Counters(shm.NICBlock, q).Snapshot()
				tot = tot.Add(s.Sub(prev[q]))
				prev[q] = s
			}
			log.Info().Float64("mpps", float64(tot[counters.Packets])/secs/1e6).
				Uint64("bx_full", tot[counters.DropBxFull]).Uint64("ax_starved", tot[counters.DropAxStarved]).
				Uint64("borrows", tot[counters.BorrowsIn]).Msg("interval")
		}
	}
}

// printRings prints the per-ring table of a region.
func printRings(w io.Writer, r *shm.Region) {
	rows := make([]counters.Row, r.Geo.NumBx)
	for q := range rows {
		rows[q] = counters.Row{Label: fmt.Sprintf("q%d", q), Snap: r.Counters(shm.NICBlock, q).Snapshot()}
	}
	counters.WriteTable(w, nil, counters.RingColumns, rows, 0)
}
