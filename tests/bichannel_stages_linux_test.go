//go:build linux

package tests

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	_ "unsafe" // go:linkname runtime.nanotime
)

// Stage breakdown of a ping-pong round trip (BICH_STAGES=1): the request
// carries CLOCK_MONOTONIC stamps (runtime.nanotime, the vDSO clock, the
// same in every process and in perf's -k CLOCK_MONOTONIC traces) taken by
// the client before its Send and by the server when its receive returned
// and just before its reply's send; the client stamps when its Send
// returned and when the reply came back. The four segments add up to the
// round trip:
//
//	send   client Send call (build, TX ring / sendmsg)
//	out    Send returned -> server's receive returned (vnicd TX pickup and
//	       kick, veth, kernel UDP/TCP, the server's wake-up)
//	server server's receive returned -> its reply's send starts
//	back   server's send starts -> client's receive returned (sendmsg, veth,
//	       XDP redirect, AF_XDP, vnicd engine, Bx, the client's wake-up)
//
// BICH_STAGES_FILE=path also writes every round trip's stamps (one line
// each: t0 t1 t2 t3 t4, ns) to path.<variant>, to join with a perf trace.

//go:linkname nanotime runtime.nanotime
func nanotime() int64

// biStageFlag in byte 1 of a ping asks the server to stamp it: bytes 24:32
// when its receive returned, 32:40 just before it sends the reply.
const biStageFlag = 'S'

// biStampRecv and biStampSend are the server's stamps.
func biStampRecv(d []byte, t int64) {
	if len(d) >= 40 && d[1] == biStageFlag {
		binary.BigEndian.PutUint64(d[24:], uint64(t))
	}
}

func biStampSend(d []byte) {
	if len(d) >= 40 && d[1] == biStageFlag {
		binary.BigEndian.PutUint64(d[32:], uint64(nanotime()))
	}
}

type biStageRec struct{ t0, t1, t2, t3, t4 int64 }

// biStages runs a stamped ping-pong for d after 100 ms of warm-up.
func biStages(l biConn, d time.Duration) ([]biStageRec, error) {
	msg := make([]byte, 64)
	msg[0], msg[1] = biOpPing, biStageFlag
	recs := make([]biStageRec, 0, 1<<15)
	warm := time.Now().Add(100 * time.Millisecond)
	var start time.Time
	for {
		now := time.Now()
		if start.IsZero() && now.After(warm) {
			start = now
		}
		if !start.IsZero() && now.Sub(start) >= d {
			return recs, nil
		}
		clear(msg[16:])
		t0 := nanotime()
		binary.BigEndian.PutUint64(msg[8:], uint64(t0))
		if err := l.send(msg); err != nil {
			return nil, err
		}
		t1 := nanotime()
		r, err := l.recv()
		t4 := nanotime()
		if err != nil {
			return nil, err
		}
		if len(r) != 64 || r[0] != biOpPing || int64(binary.BigEndian.Uint64(r[8:])) != t0 {
			return nil, fmt.Errorf("stages: echo of %d bytes does not match the request", len(r))
		}
		if !start.IsZero() {
			recs = append(recs, biStageRec{t0, t1, int64(binary.BigEndian.Uint64(r[24:])), int64(binary.BigEndian.Uint64(r[32:])), t4})
		}
	}
}

// biStageSummary gives each segment's p50 and p99 (µs) and the round
// trip's.
func biStageSummary(recs []biStageRec) string {
	seg := func(f func(r biStageRec) int64) (p50, p99 float64) {
		v := make([]int64, len(recs))
		for i, r := range recs {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v) == 0 {
			return 0, 0
		}
		return float64(v[len(v)/2]) / 1e3, float64(v[(len(v)-1)*99/100]) / 1e3
	}
	var b strings.Builder
	for _, s := range []struct {
		name string
		f    func(r biStageRec) int64
	}{
		{"send", func(r biStageRec) int64 { return r.t1 - r.t0 }},
		{"out", func(r biStageRec) int64 { return r.t2 - r.t1 }},
		{"server", func(r biStageRec) int64 { return r.t3 - r.t2 }},
		{"back", func(r biStageRec) int64 { return r.t4 - r.t3 }},
		{"rtt", func(r biStageRec) int64 { return r.t4 - r.t0 }},
	} {
		p50, p99 := seg(s.f)
		fmt.Fprintf(&b, " %s %.1f/%.1f", s.name, p50, p99)
	}
	return fmt.Sprintf("%d round trips, p50/p99 µs:%s", len(recs), b.String())
}

// biStageDump writes the records to path (BICH_STAGES_FILE + "." + variant).
func biStageDump(path string, recs []biStageRec) error {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%d %d %d %d %d\n", r.t0, r.t1, r.t2, r.t3, r.t4)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
