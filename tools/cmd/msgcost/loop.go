package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/trace"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/bichannel/hist"
)

// maxSize is the largest message size -sizes takes: the bi-channel's
// default MaxPayload, one Ethernet frame.
const maxSize = 1400

// The first byte of every message says what it is; the rest is padding
// to the case's size, except the counts that stop and done carry.
const (
	tagData = 'd' // a message of the load
	tagStop = 's' // node 0 to node 1: the load is over; bytes 1..8: data messages sent
	tagDone = 'D' // node 1 to node 0: bytes 1..8 data messages received, 9..16 of them by TCP
)

// A case is one row of the table.
type kase struct {
	Path    string // fabric, udp, tcp
	Size    int    // bytes per message
	Batch   int    // messages per call
	Pattern string // stream, pingpong, idle
	Place   string // one, per-node
}

// A trial is one case measured once, with what both processes need.
type trial struct {
	kase
	Warmup, Duration time.Duration
	N                int64         // messages node 0 sends in the measured interval (0: -duration alone)
	Timeout          time.Duration // bound on the whole trial
	Socket           string        // vnicd's, for fabric
	VnicSpin         time.Duration
	FutexWait        bool // fabric: workers sleep on their queue's futex, not in the netpoller
	// IdleSettle is how long an idle trial waits after its warm-up
	// traffic before the measured interval.
	IdleSettle time.Duration
	// Trace names a file for a Go execution trace of node 0's process
	// over the measured interval ("": none).
	Trace string `json:",omitempty"`
}

// A result is what node 0 measured.
type result struct {
	kase
	Run      int
	Msgs     int64 // messages delivered in the measured interval (both directions in ping-pong; none when idle)
	Wall     time.Duration
	Host     time.Duration // schedstat CPU of the node processes
	Cross    time.Duration // getrusage + /proc/<pid>/stat, the cross-check
	NIC      time.Duration // vnicd's schedstat CPU
	RTT      *hist.Histogram
	ViaTCP   int64 // messages that came by TCP retransmission, whole trial, both ends
	Sent     int64 // data messages node 0 sent, warm-up included
	Received int64 // of those, node 1 received
	Echoes   int64 // ping-pong: echoes node 0 received
}

// ok reports whether the trial measured something: messages delivered,
// or (idle) an interval.
func (r *result) ok() bool {
	if r.Pattern == "idle" {
		return r.Wall > 0
	}
	return r.Msgs > 0
}

// HostPerMsg is host CPU per message in µs (NaN if none delivered); for
// an idle trial, host CPU per second of the interval in µs.
func (r *result) HostPerMsg() float64 { return r.per(r.Host, r.Msgs) }

// CrossPerMsg is the cross-check's CPU per message in µs (idle: per
// second).
func (r *result) CrossPerMsg() float64 { return r.per(r.Cross, r.Msgs) }

// NICPerFrame is vnicd's CPU per frame it carried in µs: every message
// that came by the fast path is one frame. For an idle trial it is
// vnicd's CPU per second of the interval in µs.
func (r *result) NICPerFrame() float64 {
	if r.Path != "fabric" {
		return math.NaN()
	}
	return r.per(r.NIC, max(r.Msgs-r.ViaTCP, 1))
}

// per is d per message, or per second of the interval for an idle trial.
func (r *result) per(d time.Duration, n int64) float64 {
	if r.Pattern == "idle" {
		if r.Wall <= 0 {
			return math.NaN()
		}
		return float64(d.Nanoseconds()) / 1e3 / r.Wall.Seconds()
	}
	return perMsg(d, n)
}

// Rate is messages delivered per second (NaN for an idle trial).
func (r *result) Rate() float64 {
	if r.Wall <= 0 || r.Pattern == "idle" {
		return math.NaN()
	}
	return float64(r.Msgs) / r.Wall.Seconds()
}

func perMsg(d time.Duration, n int64) float64 {
	if n <= 0 {
		return math.NaN()
	}
	return float64(d.Nanoseconds()) / 1e3 / float64(n)
}

// newMsgs is k messages of size bytes, tagged tag, in one buffer.
func newMsgs(k, size int, tag byte) [][]byte {
	buf := make([]byte, k*size)
	out := make([][]byte, k)
	for i := range out {
		out[i] = buf[i*size : (i+1)*size : (i+1)*size]
		out[i][0] = tag
	}
	return out
}

// countMsg returns a message tagged tag carrying a and b.
func countMsg(size int, tag byte, a, b int64) [][]byte {
	m := newMsgs(1, max(size, 17), tag)
	binary.LittleEndian.PutUint64(m[0][1:], uint64(a))
	binary.LittleEndian.PutUint64(m[0][9:], uint64(b))
	return m
}

func counts(m []byte) (int64, int64, error) {
	if len(m) < 17 {
		return 0, 0, fmt.Errorf("a %c message of %d bytes: want 17 or more", m[0], len(m))
	}
	return int64(binary.LittleEndian.Uint64(m[1:])), int64(binary.LittleEndian.Uint64(m[9:])), nil
}

// A streamer is node 0's stream loop: one call sends a batch.
type streamer struct {
	l    link
	msgs [][]byte
	sent int64
}

func (s *streamer) step() error {
	if err := s.l.send(s.msgs); err != nil {
		return err
	}
	s.sent += int64(len(s.msgs))
	return nil
}

// A pinger is node 0's ping-pong loop: one call sends a batch and waits
// for as many echoes.
type pinger struct {
	l      link
	msgs   [][]byte
	dst    [][]byte
	sent   int64
	echoes int64
}

func (p *pinger) step() error {
	if err := p.l.send(p.msgs); err != nil {
		return err
	}
	p.sent += int64(len(p.msgs))
	for got := 0; got < len(p.msgs); {
		in, err := p.l.recv(p.dst[:0])
		if err != nil {
			return err
		}
		for _, m := range in {
			if len(m) == 0 || m[0] != tagData {
				return fmt.Errorf("ping-pong: a message tagged %q, want echoes", m[:min(len(m), 1)])
			}
			got++
		}
		p.echoes += int64(len(in))
	}
	return nil
}

// startTrace starts a Go execution trace into the file path names, if
// any, and returns what ends it.
func startTrace(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("trace: %w", err)
	}
	return func() error {
		trace.Stop()
		return f.Close()
	}, nil
}

// drive is node 0: warm-up, the measured interval between two samples,
// then stop and wait for node 1's count. An idle trial streams during
// the warm-up, then sends nothing: its interval measures what two
// connected nodes that wait for messages cost.
func drive(l link, t trial, s sampler) (result, error) {
	res := result{kase: t.kase, RTT: hist.New()}
	var stop atomic.Bool
	var step func() error
	var pp *pinger
	var st *streamer
	if t.Pattern == "pingpong" {
		pp = &pinger{l: l, msgs: newMsgs(t.Batch, t.Size, tagData), dst: make([][]byte, 0, maxBatch)}
		step = pp.step
	} else {
		st = &streamer{l: l, msgs: newMsgs(t.Batch, t.Size, tagData)}
		step = st.step
	}
	run := func(d time.Duration, limit int64, rtt *hist.Histogram) (int64, error) {
		stop.Store(false)
		tm := time.AfterFunc(d, func() { stop.Store(true) })
		defer tm.Stop()
		var calls int64
		for !stop.Load() && (limit <= 0 || calls < limit) {
			var t0 time.Time
			if rtt != nil {
				t0 = time.Now()
			}
			if err := step(); err != nil {
				return calls, err
			}
			if rtt != nil {
				rtt.Record(time.Since(t0))
			}
			calls++
		}
		return calls, nil
	}
	if _, err := run(t.Warmup, 0, nil); err != nil {
		return res, fmt.Errorf("warm-up: %w", err)
	}
	idle := t.Pattern == "idle"
	if idle {
		time.Sleep(t.IdleSettle)
	}
	var c0, c1 cpuSnap
	var err error
	var calls int64
	if idle {
		if c0, c1, err = idleInterval(s, t.Duration); err != nil {
			return res, err
		}
	} else {
		if c0, err = s.sample(); err != nil {
			return res, err
		}
		var rtt *hist.Histogram
		limit := int64(0)
		if t.N > 0 {
			limit = max(t.N/int64(t.Batch), 1)
		}
		if pp != nil {
			rtt = res.RTT
		}
		stopTrace, err := startTrace(t.Trace)
		if err != nil {
			return res, err
		}
		calls, err = run(t.Duration, limit, rtt)
		if terr := stopTrace(); terr != nil && err == nil {
			err = terr
		}
		if err != nil {
			return res, fmt.Errorf("measured interval: %w", err)
		}
	}
	// Stop: node 1 answers once every data message is in, so that the
	// interval ends with the last one delivered.
	var sent int64
	if pp != nil {
		sent = pp.sent
	} else {
		sent = st.sent
	}
	if err := l.send(countMsg(t.Size, tagStop, sent, 0)); err != nil {
		return res, fmt.Errorf("stop: %w", err)
	}
	dst := make([][]byte, 0, maxBatch)
	var got, viaTCP int64
	for done := false; !done; {
		in, err := l.recv(dst[:0])
		if err != nil {
			return res, fmt.Errorf("waiting for node 1's count: %w", err)
		}
		for _, m := range in {
			if len(m) > 0 && m[0] == tagDone {
				if got, viaTCP, err = counts(m); err != nil {
					return res, err
				}
				done = true
			}
		}
	}
	if !idle {
		if c1, err = s.sample(); err != nil {
			return res, err
		}
	}
	res.Msgs = calls * int64(t.Batch)
	if pp != nil {
		res.Msgs *= 2
		res.Echoes = pp.echoes
	}
	res.Wall, res.Host, res.Cross, res.NIC = c1.at.Sub(c0.at), c1.host-c0.host, c1.cross-c0.cross, c1.nic-c0.nic
	res.Sent, res.Received, res.ViaTCP = sent, got, viaTCP+l.viaTCP()
	if got != sent {
		return res, fmt.Errorf("node 0 sent %d messages, node 1 received %d", sent, got)
	}
	if pp != nil && pp.echoes != sent {
		return res, fmt.Errorf("node 0 sent %d messages and received %d echoes", sent, pp.echoes)
	}
	return res, nil
}

// serve is node 1: count (stream) or echo (ping-pong) until the stop and
// every data message before it are in, then answer with the count.
func serve(l link, t trial) error {
	var echo [][]byte
	if t.Pattern == "pingpong" {
		echo = newMsgs(t.Batch, t.Size, tagData)
	}
	dst := make([][]byte, 0, maxBatch)
	var got int64
	total := int64(-1)
	pending := 0
	for total < 0 || got < total {
		in, err := l.recv(dst[:0])
		if err != nil {
			return fmt.Errorf("node 1: %w", err)
		}
		for _, m := range in {
			switch {
			case len(m) > 0 && m[0] == tagData:
				got++
				if echo != nil {
					if pending++; pending == t.Batch {
						if err := l.send(echo); err != nil {
							return fmt.Errorf("node 1: echo: %w", err)
						}
						pending = 0
					}
				}
			case len(m) > 0 && m[0] == tagStop:
				if total, _, err = counts(m); err != nil {
					return fmt.Errorf("node 1: %w", err)
				}
			default:
				return fmt.Errorf("node 1: a message tagged %q", m[:min(len(m), 1)])
			}
		}
	}
	if got != total {
		return fmt.Errorf("node 1: received %d messages, node 0 sent %d", got, total)
	}
	if err := l.send(countMsg(t.Size, tagDone, got, l.viaTCP())); err != nil {
		return fmt.Errorf("node 1: done: %w", err)
	}
	return nil
}

var errTimeout = errors.New("trial timed out")
