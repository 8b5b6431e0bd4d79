package main

import (
	"context"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
)

// rig is a daemon started in the test on a temporary socket, with
// tenants attached through the client library.
type rig struct {
	t      *testing.T
	d      *daemon.Daemon
	socket string
	src    *testutil.Paced
	got    map[string]*atomic.Int64 // packets each receiving tenant's app took
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	// shutdown stops the daemon (once; the test's cleanup calls it too).
	shutdown func()
}

func startRig(t *testing.T, src *testutil.Paced) *rig {
	t.Helper()
	cfg := testutil.DaemonConfig(t, src)
	cfg.SourceMode, cfg.Version = "paced fake", "test-1"
	d := testutil.StartDaemon(t, cfg)
	sock := d.Socket
	shutdown := func() { d.Stop() } // the test's cleanup reports its error
	r := &rig{t: t, d: d.Daemon, socket: sock, src: src, got: map[string]*atomic.Int64{}, shutdown: shutdown}
	r.ctx, r.stop = context.WithCancel(context.Background())
	t.Cleanup(func() { r.stop(); r.wg.Wait() }) // runs before the daemon stops
	return r
}

// attach attaches a tenant; with receive, a goroutine per queue takes and
// releases its packets, counting them in r.got[name].
func (r *rig) attach(o client.AttachOptions, receive bool) *client.Tenant {
	r.t.Helper()
	ten, err := client.Attach(context.Background(), r.socket, o)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		r.stop() // the receivers must be gone before the region is unmapped
		r.wg.Wait()
		ten.Close()
	})
	if !receive {
		return ten
	}
	got := new(atomic.Int64)
	r.got[o.Name] = got
	for q := 0; q < ten.Queues(); q++ {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			queue := ten.Queue(q)
			pk := make([]client.Packet, 0, 32)
			for r.ctx.Err() == nil {
				if err := queue.Wait(r.ctx); err != nil {
					return
				}
				pk, _ = queue.Recv(pk[:0])
				queue.Release(pk)
				got.Add(int64(len(pk)))
			}
		}()
	}
	return ten
}

// tenantTotals sums a tenant's delivered packets and counted drops.
func tenantTotals(st proto.Stats, name string) (pkts, drops uint64) {
	for _, ten := range st.Tenants {
		if ten.Name != name {
			continue
		}
		for _, r := range ten.Rings {
			pkts += r.NIC["packets"]
			drops += r.NIC["drops_bx_full"] + r.NIC["drops_ax_starved"] + r.NIC["drops_faulty"] + r.NIC["drops_bad_buffer"]
		}
	}
	return pkts, drops
}

// settle waits until the source is exhausted, every frame is accounted for
// (delivered + counted drops = sent to the tenant, and every receiving app
// took what was delivered to it) and the counters stopped moving; it
// returns the daemon's final Stats.
func (r *rig) settle(ports map[string][]uint16) proto.Stats {
	r.t.Helper()
	testutil.WaitFor(r.t, 15*time.Second, "every frame to be accounted for", func() bool {
		if r.src.Sent() < r.src.Total() {
			return false
		}
		st := r.d.Stats()
		for name, ps := range ports {
			var want int64
			for _, p := range ps {
				want += r.src.SentTo(p)
			}
			p, d := tenantTotals(st, name)
			if int64(p+d) != want {
				return false
			}
			if g, ok := r.got[name]; ok && g.Load() != int64(p) {
				return false
			}
		}
		return true
	})
	var prev proto.Stats
	var st proto.Stats
	testutil.WaitFor(r.t, 5*time.Second, "the counters to stop moving", func() bool {
		prev, st = st, r.d.Stats()
		time.Sleep(20 * time.Millisecond)
		return reflect.DeepEqual(prev.Tenants, st.Tenants) && reflect.DeepEqual(prev.Global, st.Global)
	})
	return st
}

// mustRun runs vnicctl in-process and fails the test on an error.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := run(t, args...)
	if err != nil {
		t.Fatalf("vnicctl %s: %v (stderr %q)", strings.Join(args, " "), err, errOut)
	}
	return out
}

// TestMain checks that the tests leave no goroutine or descriptor behind.
func TestMain(m *testing.M) {
	if os.Getenv("VNICCTL_TEST_MAIN_ARGS") != "" {
		os.Exit(m.Run()) // a child of TestExitStatus; it exits from main
	}
	os.Exit(testutil.MainWithLeakCheck(m))
}

// trafficRig starts a daemon with two tenants and sends them 6000 frames:
// "app" (2 queues, UDP ports 7000-7001) receives everything; "lazy" (1
// queue, port 7002, a 64-entry Ax ring) never receives, so after its 64
// buffers its frames are dropped as allocation starvation. It returns the
// daemon's counters once they settled.
func trafficRig(t *testing.T) (*rig, proto.Stats) {
	t.Helper()
	r := startRig(t, testutil.NewPaced(6000, 200*time.Microsecond, 7000, 7001, 7002))
	r.attach(client.AttachOptions{Name: "app", Queues: 2, Match: client.Match{Proto: "udp", DstPortLo: 7000, DstPortHi: 7001}}, true)
	r.attach(client.AttachOptions{Name: "lazy", AxSize: 64, Match: client.Match{DstPortLo: 7002, DstPortHi: 7002}}, false)
	r.src.Open()
	st := r.settle(map[string][]uint16{"app": {7000, 7001}, "lazy": {7002}})
	return r, st
}
