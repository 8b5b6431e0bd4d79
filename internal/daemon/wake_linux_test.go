//go:build linux

package daemon_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/rss"
	"github.com/vnic/vnic/shm"
)

// TestHostileWakeChannel attacks the wake-up channel from a tenant's side
// with everything a tenant holds: it tries to pass a descriptor through
// its doorbell (a lingering TCP socket, whose final close would block the
// thread that drops it), makes the doorbell blocking, hangs 2,000 epoll
// waiters on it, rings it without pause, and bumps its need-wakeup
// generation on every batch so that vnicd signals it all the time. vnicd
// must keep serving a good tenant (every frame accounted), answer the
// control plane, and never refuse or block on a signal.
func TestHostileWakeChannel(t *testing.T) {
	src, td, good, _, files := hostileBed(t, false)
	ctx := context.Background()
	if len(files) != 2 {
		t.Fatalf("attach sent %d descriptors, want a memfd and one doorbell", len(files))
	}
	region, err := shm.Map(files[0])
	files[0].Close()
	if err != nil {
		t.Fatal(err)
	}
	defer region.Close()
	bell := files[1]
	defer bell.Close()
	evil, err := client.Local(region, client.Options{}) // fills its Ax ring: vnicd posts to it
	if err != nil {
		t.Fatal(err)
	}
	fd := int(bell.Fd())

	// A descriptor cannot travel on the doorbell: it is not a socket.
	lingering, release, err := testutil.LingeringSocket()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	rights := unix.UnixRights(lingering)
	if err := unix.Sendmsg(fd, []byte{1}, rights, nil, unix.MSG_DONTWAIT); err == nil {
		t.Fatal("sendmsg with SCM_RIGHTS on the doorbell succeeded: a tenant could make vnicd's thread run its descriptor's final close")
	} else {
		t.Logf("SCM_RIGHTS on the doorbell: %v", err)
	}

	// vnicd shares the doorbell's file description.
	for _, d := range blockAndHang(t, fd, unix.EPOLLIN|unix.EPOLLOUT) {
		defer unix.Close(d)
	}

	actx, stopAttack := context.WithCancel(ctx)
	var attack sync.WaitGroup
	attack.Add(2)
	go bumpGenerations(actx, region, evil, attack.Done)
	go func() { // ring without pause (one at a time: the counter never reaches its ceiling)
		defer attack.Done()
		one := [8]byte{1}
		for actx.Err() == nil {
			unix.Write(fd, one[:])
			time.Sleep(50 * time.Microsecond)
		}
	}()

	var got atomic.Int64
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); receive(rctx, good.Queue(0), &got) }()
	src.Open()
	deadline := time.Now().Add(30 * time.Second)
	for !(src.Sent() == 40000 && accounted(td, "good", src.SentTo(6000), &got)) {
		if time.Now().After(deadline) {
			t.Fatalf("the good tenant stalled: %d of %d frames sent, %d of %d to it received; %s", src.Sent(), 40000, got.Load(), src.SentTo(6000), td.StatsSummary())
		}
		statusAnswers(t, td) // the control plane answers throughout
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()
	stopAttack()
	attack.Wait()
	is := td.d.Engine().IdleStats()
	if is.Signals == 0 {
		t.Errorf("vnicd never signalled (%+v): the attack did not reach the signal path", is)
	}
	if is.Refused != 0 {
		t.Errorf("%d signals refused (%+v): a futex wake on the tenant's word failed", is.Refused, is)
	}
	t.Logf("good tenant received %d frames; vnicd: %d wake-ups sent, %d sleeps, %d doorbells",
		got.Load(), is.Signals, is.Sleeps, is.Doorbells)
}

// wireSource is a Waitable test source: frames the test injects, and an
// eventfd that is readable while some are queued.
type wireSource struct {
	mu  sync.Mutex
	q   [][]byte
	efd int
}

func newWireSource(t *testing.T) *wireSource {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &wireSource{efd: fd}
}

func (w *wireSource) inject(f []byte) {
	w.mu.Lock()
	w.q = append(w.q, f)
	w.mu.Unlock()
	one := [8]byte{1}
	unix.Write(w.efd, one[:])
}

func (w *wireSource) Recv(dst [][]byte) ([][]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.q) == 0 {
		return dst, nil
	}
	var b [8]byte
	unix.Read(w.efd, b[:])
	dst = append(dst, w.q...)
	w.q = w.q[:0]
	return dst, nil
}

func (w *wireSource) WaitFDs() []int { return []int{w.efd} }

// sinkFunc adapts a function to nic.TxSink.
type sinkFunc func([][]byte) (int, error)

func (f sinkFunc) Send(frames [][]byte) (int, error) { return f(frames) }

// TestWakeupExchanges runs single-packet exchanges through vnicd with
// random pauses on both sides, long enough for both the client and the
// engine to fall asleep: the wire injects one frame, the client's Wait
// wakes, it receives, releases and sends one reply through its TX ring,
// the engine (woken by the doorbell if it slept) hands it to the wire,
// and the wire injects the next. Not one Wait may end because a poll timed
// out instead of by vnicd's signal; the engine must have slept and been
// woken by doorbells. It reports the wake latency (injection to Wait's
// return) of the waits that slept. VNIC_SOAK=1 runs 1,000,000 exchanges.
func TestWakeupExchanges(t *testing.T) {
	n := 3000
	if testutil.KnobsFor(t).Soak {
		n = 1000000
	}
	if testing.Short() {
		n = 2000
	}
	wakeupExchanges(t, n, 0)
}

// TestWakeupExchangesCoalesced is TestWakeupExchanges with interrupt
// moderation on both sides (the engine's RxCoalesce, the client's
// Coalesce): the naps publish no need-wakeup word, and a wait that naps
// and then sleeps must still be woken by vnicd's signal.
func TestWakeupExchangesCoalesced(t *testing.T) {
	wakeupExchanges(t, 2000, 30*time.Microsecond)
}

func wakeupExchanges(t *testing.T, n int, coalesce time.Duration) {
	wire := newWireSource(t)
	replies := make(chan struct{}, 1)
	sink := sinkFunc(func(frames [][]byte) (int, error) {
		for range frames {
			replies <- struct{}{}
		}
		return len(frames), nil
	})
	td := startDaemon(t, wire, func(c *daemon.Config) {
		c.Engine.Tx = sink
		c.Engine.SpinBudget = 50 * time.Microsecond
		c.Engine.RxCoalesce = coalesce
	})
	// 10 minutes, or 80 for the soak's million (at about a millisecond
	// per exchange on a loaded 2-CPU machine it needs more than 10).
	budget := 10 * time.Minute
	if n > 100000 {
		budget = 80 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	ten, err := client.Attach(ctx, td.socket, client.AttachOptions{Name: "pingpong", Queues: 1, Match: client.Match{Default: true}, Spin: 20 * time.Microsecond, Coalesce: coalesce})
	if err != nil {
		t.Fatal(err)
	}
	defer ten.Close()
	frame := rss.BuildUDP4(nil, [6]byte{2}, [6]byte{2, 1}, netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.19.0.1"), 1000, 2000, 18)
	pause := func(r *rand.Rand) {
		switch p := r.IntN(100); {
		case p < 60:
		case p < 94:
			spinFor(time.Duration(r.IntN(40)) * time.Microsecond)
		default:
			time.Sleep(time.Duration(100+r.IntN(400)) * time.Microsecond) // both sides fall asleep
		}
	}
	var injected atomic.Int64 // ns timestamp of the last injection
	lat := make([]time.Duration, 0, n)
	slept := make([]bool, 0, n)
	errc := make(chan error, 1)
	fin := make(chan struct{})
	var stats client.WaitStats
	go func() {
		q := ten.Queue(0)
		r := rand.New(rand.NewPCG(1, 2))
		pk := make([]client.Packet, 0, 32)
		for i := 0; i < n; i++ {
			before := q.WaitStats().Sleeps
			if err := q.Wait(ctx); err != nil {
				errc <- fmt.Errorf("exchange %d: Wait: %w", i, err)
				return
			}
			lat = append(lat, time.Duration(time.Now().UnixNano()-injected.Load()))
			slept = append(slept, q.WaitStats().Sleeps != before)
			pk, _ = q.Recv(pk[:0])
			if len(pk) != 1 {
				errc <- fmt.Errorf("exchange %d: received %d packets, want 1", i, len(pk))
				return
			}
			q.Release(pk)
			pause(r)
			for {
				sent, err := q.Send([][]byte{frame})
				if err != nil {
					errc <- err
					return
				}
				if sent == 1 {
					break
				}
			}
		}
		stats = q.WaitStats()
		close(fin)
	}()
	r := rand.New(rand.NewPCG(3, 4))
	start := time.Now()
	for i := 0; i < n; i++ {
		injected.Store(time.Now().UnixNano())
		wire.inject(frame)
		select {
		case <-replies:
		case err := <-errc:
			t.Fatalf("client stopped early: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("exchange %d: no reply in 10 s (a lost wake-up); %s; engine %+v", i, td.StatsSummary(), td.d.Engine().IdleStats())
		}
		pause(r)
	}
	select {
	case <-fin:
	case err := <-errc:
		t.Fatal(err)
	}
	el := time.Since(start)
	is := td.d.Engine().IdleStats()
	t.Logf("%d exchanges in %v; client waits: %+v; engine: %+v", n, el.Round(time.Millisecond), stats, is)
	if stats.TimedOut != 0 {
		t.Errorf("%d waits ended by a poll timeout instead of vnicd's signal (lost wake-ups)", stats.TimedOut)
	}
	if stats.Sleeps == 0 || is.Sleeps == 0 || is.Doorbells == 0 || stats.Doorbells == 0 {
		t.Errorf("the pauses should put both sides to sleep: client %+v, engine %+v", stats, is)
	}
	if coalesce > 0 && (stats.Naps == 0 || is.Naps == 0) {
		t.Errorf("coalescing %v: the client napped %d times and the engine %d, want both > 0", coalesce, stats.Naps, is.Naps)
	}
	var sl []time.Duration
	for i, d := range lat {
		if slept[i] {
			sl = append(sl, d)
		}
	}
	t.Logf("wake latency of the %d waits that slept: %s", len(sl), percentiles(sl))
	t.Logf("latency of all %d waits: %s", len(lat), percentiles(lat))
}

func spinFor(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// percentiles formats min, p50, p99, p99.9 and max of ds.
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return fmt.Sprintf("min %v p50 %v p99 %v p99.9 %v max %v (n=%d)", s[0], at(0.50), at(0.99), at(0.999), s[len(s)-1], len(s))
}

// TestHostileInterrupts attacks the receive interrupts from a tenant's
// side: it never reads its pipe, hangs 2,000 epoll waiters on it, makes
// its end blocking, bumps its need-wakeup generation on every batch so
// that vnicd signals it all the time, and half-way closes its end. vnicd
// must keep serving a good tenant that sleeps on its own interrupts (every
// frame accounted), answer the control plane, and count the writes to the
// closed pipe as refused signals without blocking on any. (A full pipe:
// TestSignalFullPipe in package nic.)
func TestHostileInterrupts(t *testing.T) {
	src, td, good, rep, files := hostileBed(t, true)
	ctx := context.Background()
	if len(files) != 3 || !rep.Interrupts {
		t.Fatalf("attach sent %d descriptors (interrupts %v), want a memfd, a doorbell and an interrupt", len(files), rep.Interrupts)
	}
	region, err := shm.Map(files[0])
	files[0].Close()
	if err != nil {
		t.Fatal(err)
	}
	defer region.Close()
	defer files[1].Close()
	irq := files[2]
	evil, err := client.Local(region, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fd := int(irq.Fd())
	dups := blockAndHang(t, fd, unix.EPOLLIN)
	closeEnd := func() {
		for _, d := range dups {
			unix.Close(d)
		}
		dups = nil
		irq.Close()
	}
	defer func() { closeEnd() }()

	actx, stopAttack := context.WithCancel(ctx)
	var attack sync.WaitGroup
	attack.Add(1)
	go bumpGenerations(actx, region, evil, attack.Done)

	var got atomic.Int64
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); receive(rctx, good.Queue(0), &got) }()
	src.Open()
	var full int
	var before daemonIdle
	deadline := time.Now().Add(30 * time.Second)
	for !(src.Sent() == 40000 && accounted(td, "good", src.SentTo(6000), &got)) {
		if time.Now().After(deadline) {
			t.Fatalf("the good tenant stalled: %d of %d frames sent, %d of %d to it received; %s", src.Sent(), 40000, got.Load(), src.SentTo(6000), td.StatsSummary())
		}
		if full == 0 && src.Sent() >= 20000 {
			// Half-way: the pipe holds vnicd's unread wakes; close it.
			var n int
			if n, err = unix.IoctlGetInt(fd, unix.TIOCINQ); err != nil || n == 0 {
				t.Fatalf("the interrupt holds %d bytes (%v) after 20,000 frames: vnicd never signalled the hostile tenant", n, err)
			}
			full = n
			before = idleOf(td)
			closeEnd()
		}
		statusAnswers(t, td)
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()
	stopAttack()
	attack.Wait()
	after := idleOf(td)
	if full == 0 {
		t.Fatal("the run ended before the pipe was closed")
	}
	if before.refused != 0 {
		t.Errorf("%d signals refused while the pipe was open", before.refused)
	}
	if after.signals <= before.signals || after.refused == 0 {
		t.Errorf("after the hostile tenant closed its interrupt: %d signals, %d refused (before: %d, %d); want more signals, counted as refused", after.signals, after.refused, before.signals, before.refused)
	}
	t.Logf("the pipe held %d bytes when closed; good tenant received %d frames; vnicd: %d signals, %d refused",
		full, got.Load(), after.signals, after.refused)
}

type daemonIdle struct{ signals, refused uint64 }

func idleOf(td *testDaemon) daemonIdle {
	is := td.d.Engine().IdleStats()
	return daemonIdle{is.Signals, is.Refused}
}

// hostileBed starts a daemon with a paced source of 40,000 frames to
// ports 5000 (the hostile tenant's) and 6000, attaches the good tenant
// (by the client library, to 6000) and the hostile one by hand (to 5000,
// to hold its raw descriptors), both with receive interrupts if asked,
// and returns them with the hostile tenant's attach reply and descriptors.
func hostileBed(t *testing.T, interrupts bool) (*testutil.Paced, *testDaemon, *client.Tenant, proto.AttachReply, []*os.File) {
	t.Helper()
	src := testutil.NewPaced(40000, 200*time.Microsecond, 5000, 6000)
	td := startDaemon(t, src)
	good, err := client.Attach(context.Background(), td.socket, client.AttachOptions{Name: "good", Match: client.Match{DstPortLo: 6000, DstPortHi: 6000}, Interrupts: interrupts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { good.Close() })
	conn, err := proto.Dial(td.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var rep proto.AttachReply
	files, err := conn.Call(proto.TAttach, proto.Attach{Name: "evil", Queues: 1, Match: proto.Match{DstPortLo: 5000, DstPortHi: 5000}, Interrupts: interrupts}, &rep)
	if err != nil {
		t.Fatal(err)
	}
	return src, td, good, rep, files
}

// bumpGenerations keeps queue 0's need-wakeup word set to a new
// generation on every batch, so that vnicd signals it all the time, until
// ctx ends; done is called when it returns.
func bumpGenerations(ctx context.Context, region *shm.Region, evil *client.Tenant, done func()) {
	defer done()
	pk := make([]client.Packet, 0, 32)
	word := region.NeedWakeup(0)
	for g := uint32(1); ctx.Err() == nil; g++ {
		atomic.StoreUint32(word, g|1)
		pk, _ = evil.Queue(0).Recv(pk[:0])
		evil.Queue(0).Release(pk)
	}
}

// statusAnswers fails t unless vnicd's control plane answers a status
// call within a second.
func statusAnswers(t *testing.T, td *testDaemon) {
	t.Helper()
	c, err := proto.Dial(td.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var st proto.Status
	c.Unix().SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Call(proto.TStatus, nil, &st); err != nil {
		t.Fatalf("status during the attack: %v", err)
	}
}

// blockAndHang makes fd blocking and hangs 2,000 epoll waiters on it, one
// per duplicate, which it returns for the caller to close (the epoll
// instance goes with the test).
func blockAndHang(t *testing.T, fd int, events uint32) []int {
	t.Helper()
	if err := unix.SetNonblock(fd, false); err != nil {
		t.Fatal(err)
	}
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); fl&unix.O_NONBLOCK != 0 {
		t.Fatal("could not clear O_NONBLOCK")
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(ep) })
	dups := make([]int, 0, 2000)
	for i := 0; i < 2000; i++ {
		d, err := unix.Dup(fd)
		if err != nil {
			t.Fatal(err)
		}
		dups = append(dups, d)
		ev := unix.EpollEvent{Events: events, Fd: int32(d)}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, d, &ev); err != nil {
			t.Fatal(err)
		}
	}
	return dups
}
