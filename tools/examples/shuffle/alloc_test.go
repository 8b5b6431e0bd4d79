package main

import (
	"context"
	"encoding/binary"
	"testing"
)

// replayTransport is host 0's side of a 2-host shuffle with one worker:
// Send drops what host 0 sends (counting it), Receive hands fn recorded
// messages from host 1 in place.
type replayTransport struct {
	in        [][]byte
	sent, got int
}

func (r *replayTransport) Send(peer, w int, msg []byte) error { r.sent++; return nil }

func (r *replayTransport) Receive(ctx context.Context, w int, fn func(peer int, msg []byte) bool) error {
	for _, m := range r.in {
		r.got++
		if !fn(1, m) {
			break
		}
	}
	return nil
}

func (*replayTransport) MaxMsg() int  { return 1400 }
func (*replayTransport) Close() error { return nil }

// batchReplay is replayTransport sending batches, as the bi-channel does.
type batchReplay struct{ *replayTransport }

func (b batchReplay) SendBatch(peer, w int, msgs [][]byte) error {
	b.sent += len(msgs)
	return nil
}

// fromHost1 returns host 1's messages to host 0: rows rows as data
// messages of as many tuples as fit 1400 bytes, then its tally.
func fromHost1(rows int) [][]byte {
	t := GenTable(1, rows, 1)
	perMsg := (1400 - 2) / TupleLen
	var ms [][]byte
	var sum Tally
	for r := 0; r < rows; r += perMsg {
		n := min(perMsg, rows-r)
		m := make([]byte, 2+n*TupleLen)
		m[0], m[1] = msgData, byte(n)
		for i := range n {
			tup := m[2+i*TupleLen : 2+(i+1)*TupleLen]
			t.putTuple(tup, r+i)
			sum.add(tup)
		}
		ms = append(ms, m)
	}
	end := make([]byte, endLen)
	end[0] = msgEnd
	binary.LittleEndian.PutUint64(end[1:], sum.Rows)
	binary.LittleEndian.PutUint64(end[9:], sum.Sum)
	return append(ms, end)
}

// The shuffle allocates nothing per tuple it sends or gathers, nor per
// message: a host sending and gathering eight times the rows, in eight
// times the messages (used where they lie), allocates what it does at
// one time (its output, sized up front, fits).
func TestShuffleAllocatesNothingPerTuple(t *testing.T) {
	for _, batch := range []bool{false, true} {
		name := "send"
		if batch {
			name = "batch"
		}
		t.Run(name, func(t *testing.T) {
			run := func(rows int) (allocs float64, sent, got int) {
				tb := GenTable(0, rows, 1)
				in := fromHost1(rows * 2 / 5) // within Out's reservation
				rt := &replayTransport{in: in}
				var tr Transport = rt
				if batch {
					tr = batchReplay{rt}
				}
				allocs = testing.AllocsPerRun(3, func() {
					rt.sent, rt.got = 0, 0
					res, err := RunHost(context.Background(), HostConfig{ID: 0, Hosts: 2, Workers: 1, Seed: 42}, tb, tr)
					if err != nil {
						t.Fatal(err)
					}
					if res.Gathered.Rows != uint64(rows+rows*2/5)-res.SentTo[1].Rows {
						t.Fatalf("gathered %d rows", res.Gathered.Rows)
					}
				})
				return allocs, rt.sent, rt.got
			}
			few, sent1, got1 := run(2000)
			many, sent8, got8 := run(16000)
			t.Logf("%v allocations sending %d messages and gathering %d; %v sending %d and gathering %d", few, sent1, got1, many, sent8, got8)
			if many > few+1 {
				t.Errorf("%v allocations for %d more messages sent and %d more gathered", many-few, sent8-sent1, got8-got1)
			}
		})
	}
}

// A host's Output holds what it gathers, grows when a buffer is short and
// keeps what grew, so that the next shuffle into it allocates no output.
func TestOutputReusedAndGrown(t *testing.T) {
	const rows = 2000
	hc := HostConfig{ID: 0, Hosts: 2, Workers: 1, Seed: 42}
	tb := GenTable(0, rows, 1)
	rt := &replayTransport{in: fromHost1(rows)} // more than a share: Out grows
	o := NewOutput(hc, 100)
	small := cap(o.Out[0])
	c := hc
	c.Output = o
	for run := range 2 {
		res, err := RunHost(context.Background(), c, tb, rt)
		if err != nil {
			t.Fatal(err)
		}
		out := uint64(len(res.Out[0])+len(res.Local[0])) / TupleLen
		if out != res.Gathered.Rows || out != uint64(rows+rows)-res.SentTo[1].Rows {
			t.Fatalf("run %d: %d rows in the output, %d gathered", run, out, res.Gathered.Rows)
		}
		if cap(o.Out[0]) < len(res.Out[0]) || cap(o.Out[0]) <= small {
			t.Fatalf("run %d: the Output kept %d bytes of room, the gathered rows took %d", run, cap(o.Out[0]), len(res.Out[0]))
		}
	}
	alloc := func(c HostConfig) float64 {
		return testing.AllocsPerRun(3, func() {
			if _, err := RunHost(context.Background(), c, tb, rt); err != nil {
				t.Fatal(err)
			}
		})
	}
	if with, without := alloc(c), alloc(hc); with > without-2 {
		t.Errorf("%v allocations per shuffle into a grown Output, %v into fresh buffers", with, without)
	}
}
