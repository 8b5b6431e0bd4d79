package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/shm"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
)

// dumpStart sends a Dump request and returns the connection and the reply
// (or the refusal).
func dumpStart(t *testing.T, socket string, req proto.Dump) (*proto.Conn, proto.DumpReply, error) {
	t.Helper()
	c, err := proto.Dial(socket)
	if err != nil {
		t.Fatal(err)
	}
	var rep proto.DumpReply
	c.Timeout = 5 * time.Second
	if _, err := c.Call(proto.TDump, req, &rep); err != nil {
		c.Close()
		return nil, rep, err
	}
	c.Unix().SetDeadline(time.Time{})
	return c, rep, nil
}

type dumped struct {
	frames  []proto.DumpFrame
	dropped uint64 // as the last DumpFrames said
	end     proto.DumpEnd
}

// dumpRead reads the stream until TDumpEnd (or fails after limit).
func dumpRead(t *testing.T, c *proto.Conn, limit time.Duration) dumped {
	t.Helper()
	var d dumped
	c.Unix().SetReadDeadline(time.Now().Add(limit))
	for {
		typ, body, _, err := c.Recv()
		if err != nil {
			t.Fatalf("dump stream after %d frames: %v", len(d.frames), err)
		}
		switch typ {
		case proto.TDumpFrames:
			var f proto.DumpFrames
			if err := json.Unmarshal(body, &f); err != nil {
				t.Fatal(err)
			}
			d.frames = append(d.frames, f.Frames...)
			d.dropped = f.Dropped
		case proto.TDumpEnd:
			if err := json.Unmarshal(body, &d.end); err != nil {
				t.Fatal(err)
			}
			if _, _, _, err := c.Recv(); err == nil {
				t.Fatal("vnicd sent more after TDumpEnd")
			}
			return d
		default:
			t.Fatalf("message type %d in a dump stream", typ)
		}
	}
}

// tenantFrames attaches a tenant and keeps every frame it receives, per
// queue, in order.
type tenantFrames struct {
	ten  *client.Tenant
	mu   sync.Mutex
	got  [][]string
	n    atomic.Int64
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func attachKeep(t *testing.T, socket, name string, queues int, match client.Match, mutate ...func(*client.AttachOptions)) *tenantFrames {
	t.Helper()
	opts := client.AttachOptions{Name: name, Queues: queues, Match: match}
	for _, m := range mutate {
		m(&opts)
	}
	ten, err := client.Attach(context.Background(), socket, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tf := &tenantFrames{ten: ten, got: make([][]string, queues), stop: cancel}
	for q := 0; q < queues; q++ {
		tf.wg.Add(1)
		go func() {
			defer tf.wg.Done()
			pk := make([]client.Packet, 0, 32)
			for ctx.Err() == nil {
				if ten.Queue(q).Wait(ctx) != nil {
					return
				}
				pk, _ = ten.Queue(q).Recv(pk[:0])
				tf.mu.Lock()
				for _, p := range pk {
					tf.got[q] = append(tf.got[q], string(p.Data))
				}
				tf.mu.Unlock()
				tf.n.Add(int64(len(pk)))
				ten.Queue(q).Release(pk)
			}
		}()
	}
	t.Cleanup(tf.close)
	return tf
}

func (tf *tenantFrames) close() {
	tf.stop()
	tf.wg.Wait()
	tf.ten.Close()
}

// checkSubsequence checks that the dumped frames of each queue appear, in
// order and without gaps, among what the tenant received on that queue.
// vnicd mirrors a frame when it delivers it, before the tenant's receiver
// takes it off its ring: it waits (10 s at most) for the receivers to
// catch up.
func (tf *tenantFrames) checkSubsequence(t *testing.T, frames []proto.DumpFrame) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		err := tf.subsequence(frames)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

func (tf *tenantFrames) subsequence(frames []proto.DumpFrame) error {
	tf.mu.Lock()
	defer tf.mu.Unlock()
	byQ := map[int][]string{}
	for _, f := range frames {
		byQ[f.Queue] = append(byQ[f.Queue], string(f.Data))
	}
	for q, fs := range byQ {
		got := tf.got[q]
		start := -1
		for i := 0; i+len(fs) <= len(got) && start < 0; i++ {
			match := true
			for j := range fs {
				if got[i+j] != fs[j] {
					match = false
					break
				}
			}
			if match {
				start = i
			}
		}
		if start < 0 {
			return fmt.Errorf("the %d frames dumped from queue %d are not a run of the %d frames the tenant received there", len(fs), q, len(got))
		}
	}
	return nil
}

// TestDumpStreamsDeliveredFrames: a dump with a count gets exactly that
// many frames, each a frame the tenant received on the queue the dump
// says, in delivery order and timestamped during the run; the session then
// ends and frees its slot.
func TestDumpStreamsDeliveredFrames(t *testing.T) {
	src := testutil.NewPaced(1<<40, 100*time.Microsecond, 7000, 7001)
	td := startDaemon(t, src)
	tf := attachKeep(t, td.socket, "app", 2, client.Match{Default: true})
	before := time.Now()
	c, rep, err := dumpStart(t, td.socket, proto.Dump{Version: proto.DumpVersion, Tenant: "app", Count: 300})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if rep.Name != "app" || rep.Queues != 2 || rep.Queue != nil || rep.Snaplen != shm.DefaultBufSize || rep.Slots < 16 || rep.Bytes > daemon.DefaultDumpBuffer {
		t.Fatalf("dump reply %+v", rep)
	}
	if st := td.d.Stats(); st.Control["dumps_started"] != 1 {
		t.Fatalf("dumps_started %d", st.Control["dumps_started"])
	}
	src.Open()
	d := dumpRead(t, c, 20*time.Second)
	after := time.Now()
	if len(d.frames) != 300 || d.end.Reason != "count reached" || d.end.Sent != 300 {
		t.Fatalf("dumped %d frames, end %+v; want 300, count reached", len(d.frames), d.end)
	}
	queues := map[int]int{}
	for i, f := range d.frames {
		queues[f.Queue]++
		ts := time.Unix(0, f.Time)
		if ts.Before(before) || ts.After(after) || len(f.Data) != 60 || f.Len != 60 {
			t.Fatalf("frame %d: %d/%d bytes at %v, outside %v..%v", i, len(f.Data), f.Len, ts, before, after)
		}
	}
	if len(queues) != 2 {
		t.Fatalf("frames from queues %v; the 64 flows spread over both", queues)
	}
	testutil.WaitFor(t, 5*time.Second, "tf.n.Load() > 400", func() bool { return tf.n.Load() > 400 })
	tf.checkSubsequence(t, d.frames)
	testutil.WaitFor(t, 5*time.Second, "300 dumped frames", func() bool {
		st := td.d.Stats()
		return st.Control["dump_frames_sent"] == 300
	})
	// The slot is free again: a second dump of one queue, with a snaplen,
	// stopped by the client.
	q := 1
	c2, rep2, err := dumpStart(t, td.socket, proto.Dump{Version: proto.DumpVersion, Tenant: "1", Queue: &q, Snaplen: 42})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if rep2.Snaplen != 42 || rep2.Queue == nil || *rep2.Queue != 1 {
		t.Fatalf("reply %+v", rep2)
	}
	// Stop once vnicd has sent it some frames (not after a fixed sleep,
	// which a loaded run can spend before the first one).
	testutil.WaitFor(t, 10*time.Second, "td.d.Stats().Control[\"dump_frames_sent\"] > 300", func() bool { return td.d.Stats().Control["dump_frames_sent"] > 300 })
	if err := c2.Send(proto.TDumpStop, nil); err != nil {
		t.Fatal(err)
	}
	d2 := dumpRead(t, c2, 10*time.Second)
	if d2.end.Reason != "stopped by the client" || len(d2.frames) == 0 || uint64(len(d2.frames)) != d2.end.Sent {
		t.Fatalf("second dump: %d frames, end %+v", len(d2.frames), d2.end)
	}
	for _, f := range d2.frames {
		if f.Queue != 1 || len(f.Data) != 42 || f.Len != 60 {
			t.Fatalf("queue-1 dump with snaplen 42 got a frame of queue %d, %d of %d bytes", f.Queue, len(f.Data), f.Len)
		}
	}
	if st := td.d.Stats(); st.Control["dumps_started"] != 2 {
		t.Fatalf("dumps_started %d", st.Control["dumps_started"])
	}
}

// TestDumpOverflow: a client that does not read fills the mirror; the
// frames it could not take are counted (in the stream, the end, the
// status and the control counters), and the tenant loses nothing.
func TestDumpOverflow(t *testing.T) {
	const total = 20000
	src := testutil.NewPaced(total, 100*time.Microsecond, 7000)
	td := startDaemon(t, src, func(c *daemon.Config) { c.Limits.DumpBufferBytes = daemon.MinDumpBuffer })
	// Rings that hold every frame sent: the tenant loses none whether or
	// not its receiver keeps up (with the default 512-entry rings a loaded
	// -race run dropped over half of them, drops_ax_starved).
	tf := attachKeep(t, td.socket, "app", 1, client.Match{Default: true}, func(o *client.AttachOptions) { o.AxSize, o.BxSize = 32768, 32768 })
	c, rep, err := dumpStart(t, td.socket, proto.Dump{Version: proto.DumpVersion, Tenant: "app"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if rep.Slots != 16 { // 64 KiB / (2112+24), rounded down to a power of two
		t.Fatalf("a 64 KiB mirror has %d slots", rep.Slots)
	}
	// Make the client's socket buffer small so that vnicd's sends block
	// soon and the mirror fills.
	c.Unix().SetReadBuffer(4096)
	src.Open()
	testutil.WaitFor(t, 30*time.Second, "src.Sent() == total && accounted(td, \"app\", total, &tf.n)", func() bool { return src.Sent() == total && accounted(td, "app", total, &tf.n) })
	var st proto.Status
	sc, err := proto.Dial(td.socket)
	if err != nil {
		t.Fatal(err)
	}
	sc.Call(proto.TStatus, nil, &st)
	sc.Close()
	if st.Dumps != 1 || st.DumpDrops == 0 {
		t.Fatalf("status: %d dumps, %d dump drops; want 1 and some", st.Dumps, st.DumpDrops)
	}
	pkts, drops := delivered(td, "app")
	if got := tf.n.Load(); got != int64(pkts) || pkts != total {
		t.Fatalf("tenant got %d of the %d frames delivered (%d sent, %d dropped) while its dump overflowed", got, pkts, total, drops)
	}
	c.Send(proto.TDumpStop, nil)
	d := dumpRead(t, c, 20*time.Second)
	if d.end.Dropped == 0 || d.end.Mirrored+d.end.Dropped != pkts || d.end.Sent != uint64(len(d.frames)) || d.end.Sent != d.end.Mirrored {
		t.Fatalf("%d frames dumped, end %+v; want mirrored + dropped = %d delivered, all mirrored sent", len(d.frames), d.end, pkts)
	}
	if len(d.end.QueueDropped) != 1 || d.end.QueueDropped[0] != d.end.Dropped {
		t.Fatalf("drops per queue %v, total %d", d.end.QueueDropped, d.end.Dropped)
	}
	tf.checkSubsequence(t, d.frames[:1])
	if c := td.d.Stats().Control; c["dump_mirror_drops"] != d.end.Dropped {
		t.Fatalf("dump_mirror_drops %d, the session dropped %d", c["dump_mirror_drops"], d.end.Dropped)
	}
	t.Logf("%d sent, %d delivered: %d mirrored and sent, %d not mirrored (ring of %d)", total, pkts, d.end.Mirrored, d.end.Dropped, rep.Slots)
}

// TestDumpEnds: a dump ends cleanly, with a TDumpEnd saying why, when its
// tenant detaches and when vnicd stops.
func TestDumpEnds(t *testing.T) {
	src := testutil.NewPaced(1<<40, 200*time.Microsecond, 7000)
	td := startDaemon(t, src)
	tf := attachKeep(t, td.socket, "app", 1, client.Match{Default: true})
	c, _, err := dumpStart(t, td.socket, proto.Dump{Version: proto.DumpVersion, Tenant: "app"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src.Open()
	// Detach once vnicd has sent the dump some frames.
	testutil.WaitFor(t, 10*time.Second, "td.d.Stats().Control[\"dump_frames_sent\"] > 0", func() bool { return td.d.Stats().Control["dump_frames_sent"] > 0 })
	tf.close()
	d := dumpRead(t, c, 10*time.Second)
	if d.end.Reason != "tenant detached" || d.end.Sent != uint64(len(d.frames)) || d.end.Mirrored < d.end.Sent || len(d.frames) == 0 {
		t.Fatalf("after detach: %d frames, end %+v", len(d.frames), d.end)
	}
	tf2 := attachKeep(t, td.socket, "app2", 1, client.Match{Default: true})
	c2, _, err := dumpStart(t, td.socket, proto.Dump{Version: proto.DumpVersion, Tenant: "app2"})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	testutil.WaitFor(t, 5*time.Second, "tf2.n.Load() > 10", func() bool { return tf2.n.Load() > 10 })
	// Read while vnicd stops, as vnicctl does: vnicd waits only a second
	// for a session to send its backlog and end (a reader that starts
	// after the stop found the connection closed, 1 run in 40).
	stopped := make(chan struct{})
	go func() { td.Stop(); close(stopped) }() // stop reports with t.Errorf only
	d2 := dumpRead(t, c2, 10*time.Second)
	<-stopped
	if d2.end.Reason != "vnicd stopping" {
		t.Fatalf("after vnicd stopped: end %+v", d2.end)
	}
}

// TestDumpRefusals: bad and hostile dump requests get an error that says
// why (with a code for vnicctl's exit status), are counted, and leave
// vnicd serving.
func TestDumpRefusals(t *testing.T) {
	src := testutil.NewPaced(1<<40, time.Millisecond, 7000)
	td := startDaemon(t, src, func(c *daemon.Config) { c.Limits.MaxDumps = 1 })
	attachKeep(t, td.socket, "app", 2, client.Match{Default: true})
	attachKeep(t, td.socket, "other", 1, client.Match{Proto: "udp", DstPortLo: 9000, DstPortHi: 9000})
	q := func(n int) *int { return &n }
	v := proto.DumpVersion
	for _, c := range []struct {
		req  proto.Dump
		code string
		msg  string
	}{
		{proto.Dump{Version: v, Tenant: "nosuch"}, proto.CodeNotFound, "no tenant"},
		{proto.Dump{Version: v, Tenant: "99"}, proto.CodeNotFound, "no tenant"},
		{proto.Dump{Tenant: "app"}, "", "without a version"},
		{proto.Dump{Version: v + 1, Tenant: "app"}, "", "dump version"},
		{proto.Dump{Version: v}, "", "names no tenant"},
		{proto.Dump{Version: v, Tenant: "app", Queue: q(2)}, "", "no queue 2"},
		{proto.Dump{Version: v, Tenant: "app", Queue: q(-1)}, "", "no queue -1"},
		{proto.Dump{Version: v, Tenant: "app", Snaplen: -5}, "", "snaplen"},
	} {
		_, _, err := dumpStart(t, td.socket, c.req)
		var pe *proto.Error
		if !errors.As(err, &pe) || pe.Code != c.code || !strings.Contains(pe.Message, c.msg) {
			t.Errorf("%+v: %v (code %q), want code %q and %q", c.req, err, codeOf(err), c.code, c.msg)
		}
	}
	// Not JSON, and a huge snaplen (clamped to the buffer size).
	raw, err := proto.Dial(td.socket)
	if err != nil {
		t.Fatal(err)
	}
	raw.Timeout = 5 * time.Second
	if _, err := raw.Call(proto.TDump, json.RawMessage(`"x"`), nil); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("non-object dump body: %v", err)
	}
	raw.Close()
	c1, rep, err := dumpStart(t, td.socket, proto.Dump{Version: v, Tenant: "app", Snaplen: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if rep.Snaplen != shm.DefaultBufSize || rep.Bytes > daemon.DefaultDumpBuffer {
		t.Fatalf("snaplen 1 GiB: reply %+v; want it clamped to the buffer size (%d) within the dump buffer", rep, shm.DefaultBufSize)
	}
	// One dump per tenant, and --max-dumps 1.
	if _, _, err := dumpStart(t, td.socket, proto.Dump{Version: v, Tenant: "app"}); codeOf(err) != proto.CodeBusy {
		t.Errorf("second dump of one tenant: %v", err)
	}
	if _, _, err := dumpStart(t, td.socket, proto.Dump{Version: v, Tenant: "other"}); codeOf(err) != proto.CodeLimit {
		t.Errorf("dump past --max-dumps: %v", err)
	}
	// A request in the middle of a dump ends it.
	if err := c1.Send(proto.TStatus, nil); err != nil {
		t.Fatal(err)
	}
	if d := dumpRead(t, c1, 10*time.Second); !strings.Contains(d.end.Reason, "request type 11") {
		t.Fatalf("status request during a dump: end %+v", d.end)
	}
	ctl := td.d.Stats().Control
	if ctl["dumps_refused_busy"] != 1 || ctl["dumps_refused_limit"] != 1 || ctl["bad_requests"] < 8 {
		t.Fatalf("control counters %v", ctl)
	}
	// vnicd still serves, and the slot is free again.
	testutil.WaitFor(t, 5*time.Second, "no live dumps", func() bool { n, _ := dumpLiveCount(td); return n == 0 })
	c3, _, err := dumpStart(t, td.socket, proto.Dump{Version: v, Tenant: "other", Count: 1})
	if err != nil {
		t.Fatalf("dump after the refusals: %v", err)
	}
	c3.Close()
}

func dumpLiveCount(td *testDaemon) (int, error) {
	c, err := proto.Dial(td.socket)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var st proto.Status
	_, err = c.Call(proto.TStatus, nil, &st)
	return st.Dumps, err
}

func codeOf(err error) string {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return fmt.Sprint("not a proto.Error: ", err)
}
