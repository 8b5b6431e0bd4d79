//go:build linux

package tests

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/internal/testbed"
)

// The bi-channel benchmarks on the testbed (docs/bichannel.md, BENCHMARKS.md):
// node 1 in the DUT namespace, node 0 in the peer namespace, both in this
// process; vnicd (AF_XDP on the DUT's veth end, its engine pinned to CPU 0)
// serves node 1's vNIC fast path. Variants, interleaved:
//
//   - bichannel: node 1 on the vNIC fast path (vnicd), node 0 on kernel UDP;
//   - bichannel_kudp: both nodes on kernel UDP (ports vnicd does not claim);
//   - tcp: plain kernel TCP between the same namespaces (length-prefixed
//     frames, buffered reads, one write per batch).
//
// Workloads: 64 B ping-pong (rate, p50/p95/p99), pipelined 64 B echo with
// BICH_WINDOW (32) in flight, 8 KiB streams both ways (a bi-channel message
// carries one MTU, so 8 KiB is a SendBatch of six; with BICH_MTU=3500 on
// the veth pair, jumbo frames, of three), CPU-seconds per million
// messages of this process and of vnicd (/proc/<pid>/stat, getrusage), and
// the bi-channel paper's Figure 16: p95 round trip against the offered rate
// of 64 B messages, open loop, up to saturation.

// Operations of the benchmark's echo server (first payload byte), the
// same over the bi-channel and over kernel TCP.
const (
	biOpPing   = 'P' // echo the message
	biOpSink   = 'T' // count it
	biOpFinish = 'F' // u32 messages to expect in the sink: answer biOpDone once they arrived
	biOpGen    = 'G' // u32 batches, u32 batch bytes: send that many back (type biOpData)
	biOpDone   = 'D'
	biOpData   = 'X'
)

// biFrags splits a batch of size bytes into messages of at most lim bytes.
func biFrags(size, lim int) []int {
	var fr []int
	for size > 0 {
		k := min(size, lim)
		fr = append(fr, k)
		size -= k
	}
	return fr
}

// biServer serves worker 0 of node e (the peer node) until ctx ends: it
// runs to completion, answering each received batch with one SendBatch.
func biServer(ctx context.Context, e *bichannel.Endpoint, peer int) error {
	var msgs []bichannel.Message
	var sink, want uint64
	buf := make([]byte, biPayload())
	for i := range buf {
		buf[i] = biOpData
	}
	var out [][]byte
	var gen [][]byte
	for {
		var err error
		msgs, err = e.RecvWait(ctx, 0, msgs[:0])
		if err != nil {
			return err
		}
		trecv := nanotime()
		out = out[:0]
		for _, m := range msgs {
			d := m.Data
			switch d[0] {
			case biOpPing:
				biStampRecv(d, trecv)
				out = append(out, d) // valid until the next RecvWait
			case biOpSink:
				sink++
			case biOpFinish:
				want = uint64(binary.BigEndian.Uint32(d[1:]))
			case biOpGen:
				nb, size := int(binary.BigEndian.Uint32(d[1:])), int(binary.BigEndian.Uint32(d[5:]))
				gen = gen[:0]
				for _, k := range biFrags(size, len(buf)) {
					gen = append(gen, buf[:k])
				}
				for range nb {
					if _, err := e.SendBatchContext(ctx, peer, 0, gen); err != nil {
						return err
					}
				}
			}
			if want != 0 && sink >= want {
				out = append(out, []byte{biOpDone})
				sink -= want
				want = 0
			}
		}
		if len(out) > 0 {
			for _, o := range out {
				biStampSend(o)
			}
			if _, err := e.SendBatchContext(ctx, peer, 0, out); err != nil {
				return err
			}
		}
	}
}

// biTCPServe serves one connection of the kernel TCP variant: frames are a
// u32 length and the payload; replies are buffered and written when no
// more input is buffered (one write per batch, as the bi-channel server
// sends one batch per receive).
func biTCPServe(c net.Conn) error {
	defer c.Close()
	br := bufio.NewReaderSize(c, 256<<10)
	bw := bufio.NewWriterSize(c, 256<<10)
	hdr := make([]byte, 4)
	buf := make([]byte, 64<<10)
	var sink uint64
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr))
		d := buf[:4+n]
		if _, err := io.ReadFull(br, d[4:]); err != nil {
			return err
		}
		switch d[4] {
		case biOpPing:
			biStampRecv(d[4:], nanotime())
			biStampSend(d[4:])
			copy(d, hdr)
			bw.Write(d)
		case biOpSink:
			sink++
		case biOpFinish:
			if want := uint64(binary.BigEndian.Uint32(d[5:])); sink != want {
				return fmt.Errorf("tcp sink: %d messages, want %d", sink, want)
			}
			sink = 0
			bw.Write([]byte{0, 0, 0, 1, biOpDone})
		case biOpGen:
			nb, size := int(binary.BigEndian.Uint32(d[5:])), int(binary.BigEndian.Uint32(d[9:]))
			out := make([]byte, 4+size)
			binary.BigEndian.PutUint32(out, uint32(size))
			out[4] = biOpData
			for range nb {
				bw.Write(out)
			}
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
}

// biConn is one variant: a request/response and streaming client.
type biConn interface {
	send(msg []byte) error
	sendBatch(msgs [][]byte) error
	recv() ([]byte, error) // the next message
	maxMsg() int
}

type biClient struct {
	ctx  context.Context
	e    *bichannel.Endpoint
	msgs []bichannel.Message
	next int
}

func (c *biClient) send(m []byte) error { return c.e.SendContext(c.ctx, 0, 0, m) }
func (c *biClient) sendBatch(ms [][]byte) error {
	_, err := c.e.SendBatchContext(c.ctx, 0, 0, ms)
	return err
}
func (c *biClient) maxMsg() int { return biPayload() }
func (c *biClient) recv() ([]byte, error) {
	for c.next == len(c.msgs) {
		var err error
		if c.msgs, err = c.e.RecvWait(c.ctx, 0, c.msgs[:0]); err != nil {
			return nil, err
		}
		c.next = 0
	}
	c.next++
	return c.msgs[c.next-1].Data, nil
}

type biTCPClient struct {
	c   net.Conn
	br  *bufio.Reader
	out []byte
	in  []byte
}

func newBiTCPClient(c net.Conn) *biTCPClient {
	return &biTCPClient{c: c, br: bufio.NewReaderSize(c, 256<<10)}
}

func (c *biTCPClient) maxMsg() int { return 1 << 20 }
func (c *biTCPClient) send(m []byte) error {
	c.out = binary.BigEndian.AppendUint32(c.out[:0], uint32(len(m)))
	c.out = append(c.out, m...)
	_, err := c.c.Write(c.out)
	return err
}
func (c *biTCPClient) sendBatch(ms [][]byte) error {
	c.out = c.out[:0]
	for _, m := range ms {
		c.out = binary.BigEndian.AppendUint32(c.out, uint32(len(m)))
		c.out = append(c.out, m...)
	}
	_, err := c.c.Write(c.out)
	return err
}
func (c *biTCPClient) recv() ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if cap(c.in) < n {
		c.in = make([]byte, n)
	}
	c.in = c.in[:n]
	_, err := io.ReadFull(c.br, c.in)
	return c.in, err
}

type biPingResult struct {
	rate          float64 // round trips per second
	n             int
	p50, p95, p99 time.Duration
}

func biQuantiles(rtts []time.Duration) (p50, p95, p99 time.Duration) {
	if len(rtts) == 0 {
		return
	}
	slices.Sort(rtts)
	q := func(f float64) time.Duration { return rtts[int(f*float64(len(rtts)-1))] }
	return q(.5), q(.95), q(.99)
}

func biPingPong(l biConn, d time.Duration) (biPingResult, error) {
	msg := make([]byte, 64)
	msg[0] = biOpPing
	rtts := make([]time.Duration, 0, 1<<16)
	warm := time.Now().Add(100 * time.Millisecond)
	var start time.Time
	for {
		t0 := time.Now()
		if start.IsZero() && t0.After(warm) {
			start = t0
		}
		if !start.IsZero() && t0.Sub(start) >= d {
			break
		}
		binary.BigEndian.PutUint64(msg[8:], uint64(t0.UnixNano()))
		if err := l.send(msg); err != nil {
			return biPingResult{}, err
		}
		r, err := l.recv()
		if err != nil {
			return biPingResult{}, err
		}
		if len(r) != 64 || r[0] != biOpPing || binary.BigEndian.Uint64(r[8:]) != uint64(t0.UnixNano()) {
			return biPingResult{}, fmt.Errorf("echo of %d bytes does not match the request", len(r))
		}
		if !start.IsZero() {
			rtts = append(rtts, time.Since(t0))
		}
	}
	res := biPingResult{rate: float64(len(rtts)) / d.Seconds(), n: len(rtts)}
	res.p50, res.p95, res.p99 = biQuantiles(rtts)
	return res, nil
}

// biPipelined keeps window 64-byte echo requests in flight for d: after
// each reply it sends a new request (the replies of one receive answered
// with one batch). It returns echoed requests per second.
func biPipelined(l biConn, window int, d time.Duration) (float64, int, error) {
	bufs := make([][]byte, window)
	for i := range bufs {
		bufs[i] = make([]byte, 64)
		bufs[i][0] = biOpPing
	}
	if err := l.sendBatch(bufs); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	end := start.Add(d)
	done, outstanding := 0, window
	for outstanding > 0 {
		r, err := l.recv()
		if err != nil {
			return 0, 0, err
		}
		if len(r) != 64 || r[0] != biOpPing {
			return 0, 0, fmt.Errorf("pipelined: reply of %d bytes", len(r))
		}
		outstanding--
		done++
		if time.Now().Before(end) {
			if err := l.send(bufs[0]); err != nil {
				return 0, 0, err
			}
			outstanding++
		}
	}
	return float64(done) / time.Since(start).Seconds(), done, nil
}

// biStreamTo sends batches of size bytes to the server (messages of at most
// maxMsg bytes, one sendBatch per batch) and waits until they all arrived:
// payload bytes per second, and the messages sent.
func biStreamTo(l biConn, batches, size int) (float64, int, error) {
	fr := biFrags(size, l.maxMsg())
	buf := make([]byte, max(size, l.maxMsg()))
	buf[0] = biOpSink
	ms := make([][]byte, len(fr))
	for i, k := range fr {
		ms[i] = buf[:k]
	}
	t0 := time.Now()
	for range batches {
		if err := l.sendBatch(ms); err != nil {
			return 0, 0, err
		}
	}
	fin := []byte{biOpFinish, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(fin[1:], uint32(batches*len(fr)))
	if err := l.send(fin); err != nil {
		return 0, 0, err
	}
	r, err := l.recv()
	if err != nil {
		return 0, 0, err
	}
	if len(r) != 1 || r[0] != biOpDone {
		return 0, 0, fmt.Errorf("sink answered %q", r)
	}
	return float64(batches*size) / time.Since(t0).Seconds(), batches * len(fr), nil
}

// biStreamFrom asks the server for batches of size bytes and receives them.
func biStreamFrom(l biConn, batches, size int) (float64, int, error) {
	nmsg := batches * len(biFrags(size, l.maxMsg()))
	req := []byte{biOpGen, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(req[1:], uint32(batches))
	binary.BigEndian.PutUint32(req[5:], uint32(size))
	t0 := time.Now()
	if err := l.send(req); err != nil {
		return 0, 0, err
	}
	var got int
	for range nmsg {
		r, err := l.recv()
		if err != nil {
			return 0, 0, err
		}
		if r[0] != biOpData {
			return 0, 0, fmt.Errorf("stream: message of type %q", r[0])
		}
		got += len(r)
	}
	if got != batches*size {
		return 0, 0, fmt.Errorf("stream: %d bytes, want %d", got, batches*size)
	}
	return float64(got) / time.Since(t0).Seconds(), nmsg, nil
}

// biOpenLoop offers 64-byte echo requests at rate per second for d, open
// loop (replies do not gate requests), and reports the achieved reply rate
// and the round-trip quantiles from each request's send time. recv runs in
// its own goroutine.
func biOpenLoop(l biConn, rate float64, d time.Duration) (achieved float64, p50, p95, p99 time.Duration, err error) {
	n := int(rate * d.Seconds())
	rtts := make([]time.Duration, 0, n)
	recvErr := make(chan error, 1)
	got := make(chan struct{})
	epoch := time.Now()
	go func() {
		defer close(got)
		for range n {
			r, err := l.recv()
			if err != nil {
				recvErr <- err
				return
			}
			if len(r) != 64 || r[0] != biOpPing {
				recvErr <- fmt.Errorf("open loop: reply of %d bytes", len(r))
				return
			}
			rtts = append(rtts, time.Since(epoch)-time.Duration(binary.BigEndian.Uint64(r[8:])))
		}
	}()
	// Paced in ticks: every time the sender wakes it sends, as one batch,
	// the messages that fell due meanwhile (at most 64), each stamped with
	// its send time. A timer sleep lasts 50µs to a few ms here, so pacing
	// message by message would measure the sender's own lateness.
	bufs := make([][]byte, 64)
	for i := range bufs {
		bufs[i] = make([]byte, 64)
		bufs[i][0] = biOpPing
	}
	start := time.Now()
	for sent := 0; sent < n; {
		now := time.Now()
		due := min(n, int(now.Sub(start).Seconds()*rate)+1)
		k := min(due-sent, len(bufs))
		if k <= 0 {
			next := start.Add(time.Duration(float64(sent) / rate * float64(time.Second)))
			time.Sleep(min(next.Sub(now), time.Millisecond))
			continue
		}
		stamp := uint64(time.Since(epoch))
		for _, b := range bufs[:k] {
			binary.BigEndian.PutUint64(b[8:], stamp)
		}
		if err := l.sendBatch(bufs[:k]); err != nil {
			return 0, 0, 0, 0, err
		}
		sent += k
	}
	select {
	case <-got:
	case err := <-recvErr:
		return 0, 0, 0, 0, err
	case <-time.After(10 * time.Second):
		return 0, 0, 0, 0, fmt.Errorf("open loop at %.0f/s: %d of %d replies after 10s", rate, len(rtts), n)
	}
	select {
	case err := <-recvErr:
		return 0, 0, 0, 0, err
	default:
	}
	el := time.Since(start)
	p50, p95, p99 = biQuantiles(rtts)
	return float64(n) / el.Seconds(), p50, p95, p99, nil
}

func biMedian(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// ---- CPU accounting ----

// selfCPU is this process's user+system time (getrusage, µs resolution).
func selfCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// biCPU measures the CPU this process, the server process and vnicd use
// during one workload.
type biCPU struct {
	vnicd, srv       int
	self0, srv0, vn0 time.Duration
}

func startCPU(vnicd, srv int) biCPU {
	c := biCPU{vnicd: vnicd, srv: srv, self0: selfCPU()}
	c.vn0, _ = procCPU(vnicd)
	c.srv0, _ = procCPU(srv)
	return c
}

func (c biCPU) stop() (self, srv, vnicd time.Duration) {
	v, _ := procCPU(c.vnicd)
	s, _ := procCPU(c.srv)
	return selfCPU() - c.self0, s - c.srv0, v - c.vn0
}

// pinProcess puts every thread of this process on cpu (new threads inherit
// the mask) and returns a function that restores each thread's mask.
func pinProcess(cpu int) (restore func(), err error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil, err
	}
	var one unix.CPUSet
	one.Set(cpu)
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		unix.SchedSetaffinity(tid, &one) // a thread that exited meanwhile: nothing to do
	}
	return func() {
		ents, _ := os.ReadDir("/proc/self/task")
		for _, e := range ents {
			tid, _ := strconv.Atoi(e.Name())
			unix.SchedSetaffinity(tid, &all)
		}
	}, nil
}

// ---- the benchmark ----

// BenchmarkBichannelTestbed compares, in one testbed and one run, the
// bi-channel through vnicd (node 1, DUT namespace) with the bi-channel
// over kernel UDP on both ends and with plain kernel TCP between the same
// two namespaces. See the comment at the top of this file; knobs:
// BICH_REPS (3), BICH_PING_MS (1000), BICH_PIPE_MS (1000), BICH_WINDOW
// (32), BICH_BATCHES (20000 x 8 KiB per stream), BICH_APP_CPU (-1: this
// process's threads float over every CPU, vnicd's engine is pinned to CPU
// 0; n: every thread of this process on CPU n, with GOMAXPROCS 1),
// BICH_FIG16 (1: run the Figure 16 sweep), BICH_FIG16_MS (400 per point),
// BICH_FIG16_CSV (where to write the sweep; go run ./tests/fig16 plots it),
// BICH_PLACEMENT (niccore: the emulated NIC gets a core of its own, as the
// paper's emulator did; split: the client gets a core of its own and the
// engine yields its core to the server; see biPlacement), BICH_VNIC_OWNCPU
// (1: VNICConfig.OwnCPU for the client).
func BenchmarkBichannelTestbed(b *testing.B) {
	biPlacement(b)
	reps := knobs.BichReps
	pingD := time.Duration(knobs.BichPingMs) * time.Millisecond
	pipeD := time.Duration(knobs.BichPipeMs) * time.Millisecond
	window := knobs.BichWindow
	batches := knobs.BichBatches // 160 MB: 2,000 (16 MB, ~25 ms) moved 1.5x from run to run
	const size = 8 << 10
	bed := newBiBed(b, 2, 1)
	r := bed.remotePairs("bichannel-bench")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	vnicdPid, srvPid := bed.vnicd.Pid, r.srv.Process.Pid
	b.Logf("processes: vnicd (pid %d, DUT namespace, engine on CPU 0), the client (this process: node 1 of each pair, the TCP client), the server (pid %d, peer namespace: node 0 of each pair on kernel UDP, the TCP echo server)", vnicdPid, srvPid)
	if n := knobs.BichGOMAXPROCS; n > 0 {
		// The client and the server process (not vnicd): with one P, a
		// goroutine readied by the poller does not wake a second thread.
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
		b.Logf("placement: GOMAXPROCS %d in the client and the server process", n)
	}
	if cpu := knobs.BichAppCPU; cpu >= 0 {
		restore, err := pinProcess(cpu)
		if err != nil {
			b.Fatal(err)
		}
		defer restore()
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one CPU: one P, no time-slicing between Go's threads
		b.Logf("placement: vnicd's engine on CPU 0 (--emulator-cpu 0), the client process on CPU %d", cpu)
	}

	variants := []struct {
		name string
		l    biConn
	}{
		{"bichannel", &biClient{ctx: ctx, e: r.n1}},
		{"tcp", newBiTCPClient(r.tcp)},
		{"bichannel_kudp", &biClient{ctx: ctx, e: r.n1k}},
	}
	if only := knobs.BichVariants; only != "" { // e.g. bichannel,tcp: profiling one variant
		variants = slices.DeleteFunc(variants, func(v struct {
			name string
			l    biConn
		}) bool {
			return !slices.Contains(strings.Split(only, ","), v.name)
		})
	}
	type series struct {
		rate, p50, p95, p99, pipe, up, down                                                []float64
		cpuPing, srvPing, vnPing, cpuPipe, srvPipe, vnPipe, cpuStream, srvStream, vnStream []float64
	}
	res := map[string]*series{}
	for _, v := range variants {
		res[v.name] = &series{}
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	perM := func(d time.Duration, msgs int) float64 { return d.Seconds() / float64(msgs) * 1e6 }
	b.ResetTimer()
	for rep := range reps {
		for i := range variants {
			v := variants[(i+rep)%len(variants)] // alternate which goes first
			s := res[v.name]
			c := startCPU(vnicdPid, srvPid)
			pr, err := biPingPong(v.l, pingD)
			if err != nil {
				b.Fatalf("%s ping-pong: %v", v.name, err)
			}
			self, srv, vn := c.stop()
			s.cpuPing, s.srvPing, s.vnPing = append(s.cpuPing, perM(self, 2*pr.n)), append(s.srvPing, perM(srv, 2*pr.n)), append(s.vnPing, perM(vn, 2*pr.n))
			if knobs.BichStages {
				recs, err := biStages(v.l, pingD)
				if err != nil {
					b.Fatalf("%s stages: %v", v.name, err)
				}
				b.Logf("rep %d %-14s: stages: %s", rep, v.name, biStageSummary(recs))
				if f := knobs.BichStagesFile; f != "" {
					if err := biStageDump(fmt.Sprintf("%s.%s.%d", f, v.name, rep), recs); err != nil {
						b.Fatal(err)
					}
				}
			}
			c = startCPU(vnicdPid, srvPid)
			pipe, pn, err := biPipelined(v.l, window, pipeD)
			if err != nil {
				b.Fatalf("%s pipelined: %v", v.name, err)
			}
			self, srv, vn = c.stop()
			s.cpuPipe, s.srvPipe, s.vnPipe = append(s.cpuPipe, perM(self, 2*pn)), append(s.srvPipe, perM(srv, 2*pn)), append(s.vnPipe, perM(vn, 2*pn))
			c = startCPU(vnicdPid, srvPid)
			up, _, err := biStreamTo(v.l, batches, size)
			if err != nil {
				b.Fatalf("%s stream to the peer: %v", v.name, err)
			}
			down, _, err := biStreamFrom(v.l, batches, size)
			if err != nil {
				b.Fatalf("%s stream from the peer: %v", v.name, err)
			}
			self, srv, vn = c.stop()
			// Per 8 KiB message (a batch of six bi-channel messages, one TCP frame).
			s.cpuStream, s.srvStream, s.vnStream = append(s.cpuStream, perM(self, 2*batches)), append(s.srvStream, perM(srv, 2*batches)), append(s.vnStream, perM(vn, 2*batches))
			s.rate = append(s.rate, pr.rate)
			s.p50, s.p95, s.p99 = append(s.p50, us(pr.p50)), append(s.p95, us(pr.p95)), append(s.p99, us(pr.p99))
			s.pipe = append(s.pipe, pipe)
			s.up, s.down = append(s.up, up/1e6), append(s.down, down/1e6)
			b.Logf("rep %d %-14s: ping-pong %.0f/s p50 %v p95 %v p99 %v; pipelined (%d in flight) %.0f msg/s; 8KiB DUT->peer %.1f MB/s, peer->DUT %.1f MB/s; CPU-s per M msgs (client / server / vnicd): ping-pong %.2f / %.2f / %.2f, pipelined %.2f / %.2f / %.2f, 8KiB stream %.2f / %.2f / %.2f",
				rep, v.name, pr.rate, pr.p50, pr.p95, pr.p99, window, pipe, up/1e6, down/1e6,
				s.cpuPing[rep], s.srvPing[rep], s.vnPing[rep], s.cpuPipe[rep], s.srvPipe[rep], s.vnPipe[rep], s.cpuStream[rep], s.srvStream[rep], s.vnStream[rep])
		}
	}
	b.StopTimer()
	for _, v := range variants {
		s := res[v.name]
		b.ReportMetric(biMedian(s.rate), v.name+"_pingpong_rt/s")
		b.ReportMetric(biMedian(s.p50), v.name+"_p50_us")
		b.ReportMetric(biMedian(s.p95), v.name+"_p95_us")
		b.ReportMetric(biMedian(s.p99), v.name+"_p99_us")
		b.ReportMetric(biMedian(s.pipe), v.name+"_pipelined_msg/s")
		b.ReportMetric(biMedian(s.up), v.name+"_8KiB_to_peer_MB/s")
		b.ReportMetric(biMedian(s.down), v.name+"_8KiB_from_peer_MB/s")
		b.ReportMetric(biMedian(s.cpuPing), v.name+"_pingpong_cpus/Mmsg")
		b.ReportMetric(biMedian(s.srvPing), v.name+"_pingpong_server_cpus/Mmsg")
		b.ReportMetric(biMedian(s.srvPipe), v.name+"_pipelined_server_cpus/Mmsg")
		b.ReportMetric(biMedian(s.srvStream), v.name+"_stream_server_cpus/Mmsg")
		b.ReportMetric(biMedian(s.vnPing), v.name+"_pingpong_vnicd_cpus/Mmsg")
		b.ReportMetric(biMedian(s.cpuPipe), v.name+"_pipelined_cpus/Mmsg")
		b.ReportMetric(biMedian(s.vnPipe), v.name+"_pipelined_vnicd_cpus/Mmsg")
		b.ReportMetric(biMedian(s.cpuStream), v.name+"_stream_cpus/Mmsg")
		b.ReportMetric(biMedian(s.vnStream), v.name+"_stream_vnicd_cpus/Mmsg")
	}
	bs, ts, ks := res["bichannel"], res["tcp"], res["bichannel_kudp"]
	for _, x := range []struct {
		name string
		s    *series
	}{{"bichannel (vNIC)", bs}, {"bichannel_kudp", ks}} {
		if x.s == nil || ts == nil {
			continue // BICH_VARIANTS left it out
		}
		b.Logf("medians of %d reps, %s / tcp: p50 %.2fx, p99 %.2fx (target <= 1); pipelined %.2fx (target >= 1.5); 8KiB to peer %.2fx, from peer %.2fx (target >= 1)",
			reps, x.name, biMedian(x.s.p50)/biMedian(ts.p50), biMedian(x.s.p99)/biMedian(ts.p99), biMedian(x.s.pipe)/biMedian(ts.pipe),
			biMedian(x.s.up)/biMedian(ts.up), biMedian(x.s.down)/biMedian(ts.down))
	}

	if knobs.BichFig16 {
		biFigure16(b, []struct {
			name string
			l    biConn
		}(variants))
	}

	b.Logf("node 1 (vNIC): %+v; VNICFast %+v", r.n1.Stats(), r.v1.FastStats())
	b.Logf("node 1 (kernel UDP): %+v; offloads %v", r.n1k.Stats(), r.n1k.FastPath().(biNSUDP).Offloads())
	// Where frames went inside vnicd (drops: Bx full, Ax starved, faulty).
	b.Logf("vnicd ledger (balanced %v): %+v", bed.ledger("bichannel-bench").balanced(), bed.ledger("bichannel-bench"))
	// Where the fast path's losses went outside vnicd: the peer's UDP
	// sockets (RcvbufErrors) and its per-CPU backlogs (softnet_stat's
	// second column: drops at netdev_max_backlog).
	var snmp map[string]uint64
	if err := testbed.InNetns(bed.peer, func() (err error) { snmp, err = nsSNMP(); return err }); err == nil {
		b.Logf("peer namespace, UDP: InDatagrams %d, InErrors %d, RcvbufErrors %d", snmp["Udp.InDatagrams"], snmp["Udp.InErrors"], snmp["Udp.RcvbufErrors"])
	}
	if out, err := bed.inPeer("cat", "/proc/net/softnet_stat"); err == nil {
		b.Logf("peer namespace, /proc/net/softnet_stat:\n%s", out)
	}
	cancel()
}

// biFigure16 sweeps the offered rate of 64-byte echo requests, open loop,
// for each variant (interleaved per rate) until the variant saturates
// (achieved below 90% of offered or p95 above 20 ms, at two rates in a
// row), each point BICH_FIG16_REPS (3) times, and writes the medians to the CSV
// BICH_FIG16_CSV (if set).
func biFigure16(b *testing.B, variants []struct {
	name string
	l    biConn
}) {
	d := time.Duration(knobs.BichFig16Ms) * time.Millisecond
	rates := []float64{1000, 2000, 5000, 10000, 20000, 40000, 80000, 160000, 320000}
	if s := knobs.BichFig16Rates; s != "" {
		rates = rates[:0]
		for _, f := range strings.Split(s, ",") {
			r, err := strconv.ParseFloat(f, 64)
			if err != nil {
				b.Fatalf("BICH_FIG16_RATES: %v", err)
			}
			rates = append(rates, r)
		}
	}
	var csv strings.Builder
	csv.WriteString("variant,offered_per_s,achieved_per_s,p50_us,p95_us,p99_us\n")
	saturated, slow := map[string]bool{}, map[string]int{}
	us := func(x time.Duration) float64 { return float64(x) / 1e3 }
	reps := knobs.BichFig16Reps
	type point struct{ ach, p50, p95, p99 []float64 }
	for _, r := range rates {
		// Each point BICH_FIG16_REPS times, interleaved across the
		// variants; the CSV has the medians.
		pts := map[string]*point{}
		for range reps {
			for _, v := range variants {
				if saturated[v.name] {
					continue
				}
				ach, p50, p95, p99, err := biOpenLoop(v.l, r, d)
				if err != nil {
					b.Logf("figure 16: %s at %.0f/s: %v (stopping this variant)", v.name, r, err)
					saturated[v.name] = true
					delete(pts, v.name)
					continue
				}
				pt := pts[v.name]
				if pt == nil {
					pt = &point{}
					pts[v.name] = pt
				}
				pt.ach, pt.p50, pt.p95, pt.p99 = append(pt.ach, ach), append(pt.p50, us(p50)), append(pt.p95, us(p95)), append(pt.p99, us(p99))
			}
		}
		for _, v := range variants {
			pt := pts[v.name]
			if pt == nil {
				continue
			}
			ach, p50, p95, p99 := biMedian(pt.ach), biMedian(pt.p50), biMedian(pt.p95), biMedian(pt.p99)
			fmt.Fprintf(&csv, "%s,%.0f,%.0f,%.1f,%.1f,%.1f\n", v.name, r, ach, p50, p95, p99)
			b.Logf("figure 16: %-14s offered %7.0f/s achieved %7.0f/s p50 %.0fµs p95 %.0fµs p99 %.0fµs (medians of %d; p95s %.0f)", v.name, r, ach, p50, p95, p99, len(pt.p95), pt.p95)
			// Saturated: the replies fall behind the offered rate (below
			// 90%) or p95 passes 20 ms, at two rates in a row (one bad
			// point is a scheduling accident on a loaded machine).
			if ach < 0.9*r || p95 > 20e3 {
				slow[v.name]++
			} else {
				slow[v.name] = 0
			}
			if slow[v.name] >= 2 {
				saturated[v.name] = true
			}
		}
	}
	if path := knobs.BichFig16CSV; path != "" {
		if err := os.WriteFile(path, []byte(csv.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		b.Logf("figure 16: wrote %s (plot: go run ./tests/fig16 -csv %s)", path, path)
	}
}

// biPayload is the benchmark's largest bi-channel message, for the link MTU
// BICH_MTU (1500 unless set; the server process inherits it).
func biPayload() int { return biMaxPayload(knobs.BichMTU) }

// ---- the server process ----

// biServerEnv, when set in the environment, makes this test binary the
// benchmark's server process (TestHelperBichannelServer): the peer host's
// end, in the peer namespace, with CPU accounted apart from the client's.
const biServerEnv = "BICH_SERVER"

// TestHelperBichannelServer is not a test: BenchmarkBichannelTestbed runs
// this binary with BICH_SERVER set, inside the peer namespace, as the peer
// host's process. It runs node 0 of the vNIC pair (kernel UDP fast path,
// dialing node 1 at BICH_SRV_N1), node 0 of the kernel-UDP pair (dialing
// BICH_SRV_N1K) and the TCP echo server, prints "ready <tcp address>" and
// serves until its standard input closes.
func TestHelperBichannelServer(t *testing.T) {
	if os.Getenv(biServerEnv) == "" {
		t.Skip("skipping: the server process of BenchmarkBichannelTestbed, run by it")
	}
	if err := biServerMain(os.Getenv("BICH_SRV_IP"), os.Getenv("BICH_SRV_N1"), os.Getenv("BICH_SRV_N1K")); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func biServerMain(ipS, n1, n1k string) error {
	ip, err := netip.ParseAddr(ipS)
	if err != nil {
		return err
	}
	if knobs.BichSrvStats {
		signal.Ignore(os.Interrupt) // end by the closed standard input, so that the counters are printed
	}
	if path := knobs.BichSrvCPUProfile; path != "" { // the server process's own profile
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
		signal.Ignore(os.Interrupt) // end by the closed standard input, so that the profile is written
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var eps []*bichannel.Endpoint
	defer func() {
		for _, e := range eps {
			e.Close()
		}
	}()
	errc := make(chan error, 3)
	for i, target := range []string{n1, n1k} {
		e, err := bichannel.New(bichannel.Config{NodeID: 0, Workers: 1, Listen: netip.AddrPortFrom(ip, 0).String(), Fast: bichannel.FastUDP, MaxPayload: biPayload(),
			UDP: transport.UDPConfig{IP: ip, BasePort: uint16(biPeerPort + 200*i)}})
		if err != nil {
			return err
		}
		eps = append(eps, e)
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		err = e.Connect(cctx, []bichannel.Peer{{ID: 1, Addr: target}})
		ccancel()
		if err != nil {
			return fmt.Errorf("connect to node 1 at %s: %w", target, err)
		}
		go func() { errc <- biServer(ctx, e, 1) }()
	}
	ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*net.TCPConn).SetNoDelay(true)
			go func() {
				if err := biTCPServe(c); err != nil && !errors.Is(err, net.ErrClosed) {
					errc <- err
				}
			}()
		}
	}()
	fmt.Printf("ready %s\n", ln.Addr())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		if knobs.BichSrvStats { // the peer's side of the credit loop (stalls: no credit)
			for i, e := range eps {
				st := e.Stats()
				fmt.Fprintf(os.Stderr, "server, node 0 of the %s pair: sent %d, stalls %d (%v without credit), retransmitted %d, acks sent %d frames\n",
					[]string{"vNIC", "kernel-UDP"}[i], st.Sent, st.Stalls, st.StallTime, st.Retransmitted, st.AckFrames)
			}
		}
		return nil
	}
}

// biRemote is the benchmark's client side (node 1 of each pair, in the
// DUT namespace, in this process) and its server process.
type biRemote struct {
	n1, n1k *bichannel.Endpoint
	v1      *transport.VNIC
	tcp     net.Conn
	srv     *exec.Cmd
	stdin   io.WriteCloser
}

// remotePairs starts node 1 of the vNIC pair (through vnicd) and of the
// kernel-UDP pair in the DUT namespace, then the server process in the
// peer namespace, which dials both, and connects to its TCP server.
func (b *biBed) remotePairs(name string) *biRemote {
	b.tb.Helper()
	l := b.link
	var dutMAC, peerMAC [6]byte
	copy(dutMAC[:], l.DUTMAC)
	copy(peerMAC[:], l.PeerMAC)
	r := &biRemote{}
	if err := testbed.InNetns(b.dut, func() (err error) {
		r.n1, err = bichannel.New(bichannel.Config{NodeID: 1, Workers: 1, Listen: netip.AddrPortFrom(l.DUTIP, 0).String(), Fast: bichannel.FastVNIC, MaxPayload: b.maxPayload,
			VNIC: transport.VNICConfig{Socket: b.socket, Name: name, IP: l.DUTIP, MAC: dutMAC, PeerMAC: peerMAC, BasePort: biDUTPort,
				Spin: time.Duration(knobs.BichVnicSpinUs) * time.Microsecond, OwnCPU: knobs.BichVnicOwnCPU}})
		if err != nil {
			return err
		}
		u1, err := transport.NewUDP(1, transport.UDPConfig{IP: l.DUTIP, BasePort: biDUTPort + 200, MaxDatagram: bichannel.HeaderLen + b.maxPayload})
		if err != nil {
			return err
		}
		r.n1k, err = bichannel.New(bichannel.Config{NodeID: 1, Workers: 1, Listen: netip.AddrPortFrom(l.DUTIP, 0).String(), MaxPayload: b.maxPayload,
			FastPath: biNSUDP{u1, b.dut}})
		return err
	}); err != nil {
		b.tb.Fatal(err)
	}
	b.tb.Cleanup(func() { r.n1.Close(); r.n1k.Close() })
	r.v1, _ = r.n1.FastPath().(*transport.VNIC)
	exe, err := os.Executable()
	if err != nil {
		b.tb.Fatal(err)
	}
	srvArgs := []string{"netns", "exec", l.PeerNS, exe, "-test.run", "^TestHelperBichannelServer$"}
	if cpus := knobs.BichSrvCPUs; cpus != "" {
		srvArgs = append([]string{"netns", "exec", l.PeerNS, "taskset", "-c", cpus}, srvArgs[3:]...)
	}
	r.srv = exec.Command("ip", srvArgs...)
	r.srv.Env = os.Environ()
	if n := cmp.Or(knobs.BichSrvGOMAXPROCS, knobs.BichGOMAXPROCS); n > 0 {
		r.srv.Env = append(r.srv.Env, fmt.Sprintf("GOMAXPROCS=%d", n))
	}
	r.srv.Env = append(r.srv.Env, biServerEnv+"=1", "BICH_SRV_IP="+l.PeerIP.String(),
		"BICH_SRV_N1="+r.n1.ControlAddr(), "BICH_SRV_N1K="+r.n1k.ControlAddr())
	r.srv.Stderr = os.Stderr
	out, err := r.srv.StdoutPipe()
	if err != nil {
		b.tb.Fatal(err)
	}
	if r.stdin, err = r.srv.StdinPipe(); err != nil {
		b.tb.Fatal(err)
	}
	if err := r.srv.Start(); err != nil {
		b.tb.Fatal(err)
	}
	b.tb.Cleanup(func() { r.stdin.Close(); stopProcess(r.srv) })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- r.n1.Connect(ctx, []bichannel.Peer{{ID: 0}}) }()
	go func() { errc <- r.n1k.Connect(ctx, []bichannel.Peer{{ID: 0}}) }()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "ready ") {
		b.tb.Fatalf("server process: %q %v", sc.Text(), sc.Err())
	}
	go io.Copy(io.Discard, out)
	for range 2 {
		if err := <-errc; err != nil {
			b.tb.Fatalf("node 1 connect: %v", err)
		}
	}
	if err := testbed.InNetns(b.dut, func() (err error) {
		r.tcp, err = net.DialTimeout("tcp", strings.TrimPrefix(sc.Text(), "ready "), 5*time.Second)
		return err
	}); err != nil {
		b.tb.Fatal(err)
	}
	r.tcp.(*net.TCPConn).SetNoDelay(true)
	b.tb.Cleanup(func() { r.tcp.Close() })
	return r
}

// biPlacement applies BICH_PLACEMENT. Knobs set explicitly win.
//
// "niccore" gives vnicd's engine CPU 0 to itself, busy-polling (--idle
// busy), as a NIC has its own silicon and as the RxBisect paper's emulator
// had its own core; the client and the server process share the last CPU
// and sleep when they wait (client spin off: a spinning client would hold
// the CPU its server needs). Every variant, kernel TCP included, then runs
// its applications on that CPU; kernel TCP's best figures come from the
// default (unpinned) placement or from niccore itself (both applications
// on one CPU: its wake-ups never cross CPUs), measured in their own
// invocations.
//
// "split" gives the client (this process) the last CPU to itself, spinning
// for its replies without ever cutting the spin (VNICConfig.OwnCPU), and
// puts the server beside vnicd's engine on CPU 0, the engine busy-polling
// under SCHED_IDLE (--emulator-priority idle): the server preempts it the
// moment it wakes, and the engine has every cycle the server does not
// use. That is one core per busy poller on a machine that has two. Kernel
// TCP's client and server then sit on different CPUs; compare with its
// niccore figures too.
func biPlacement(b *testing.B) {
	p := knobs.BichPlacement
	var defaults map[string]string
	n := runtime.NumCPU()
	app := strconv.Itoa(n - 1)
	switch p {
	case "":
		return
	case "niccore":
		defaults = map[string]string{"BICH_VNICD_ARGS": "--idle busy", "BICH_APP_CPU": app, "BICH_SRV_CPUS": app, "BICH_VNIC_SPIN_US": "-1"}
	case "split":
		defaults = map[string]string{"BICH_VNICD_ARGS": "--idle busy --emulator-priority idle", "BICH_APP_CPU": app, "BICH_SRV_CPUS": "0",
			"BICH_SRV_GOMAXPROCS": "1", "BICH_VNIC_SPIN_US": "1000", "BICH_VNIC_OWNCPU": "1"}
	default:
		b.Fatalf("BICH_PLACEMENT=%q: give niccore, split or leave it unset", p)
	}
	if n < 2 {
		b.Skipf("BICH_PLACEMENT=%s needs 2 CPUs, this process may use %d", p, n)
	}
	saved := *knobs
	b.Cleanup(func() { *knobs = saved })
	for k, v := range defaults {
		if !knobs.IsSet(k) {
			if err := knobs.Set(k, v); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Logf("placement %s: vnicd's engine busy-polls CPU 0 (BICH_VNICD_ARGS=%q); client on CPU %d (spin %dµs, own CPU %v), server on CPU %s",
		p, knobs.BichVnicdArgs, knobs.BichAppCPU, knobs.BichVnicSpinUs, knobs.BichVnicOwnCPU, knobs.BichSrvCPUs)
}
