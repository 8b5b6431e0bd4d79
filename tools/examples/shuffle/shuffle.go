package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/vnic/vnic/internal/pages"
)

// Message kinds. A data message is a kind byte, a tuple count and that
// many tuples; an end message closes a sender worker's stream to one
// receiver worker with the sender's tally of what it sent there.
const (
	sendBatch = 16 // messages per batched send
	msgData   = 1
	msgEnd    = 2
	endLen    = 1 + 8 + 8
)

// HostConfig is one host's part of a shuffle.
type HostConfig struct {
	ID, Hosts, Workers int
	Seed               uint32 // the partitioning hash's seed
	// Output, if set, holds the gathered rows (its buffers are emptied
	// first, and grow if one is short); else RunHost allocates them.
	Output *Output
}

// Output is a host's gather buffers, by worker: the rows from other hosts
// (Out) and the host's own (Local).
type Output struct {
	Out, Local [][]byte
	rows       int // the table size they were sized for
}

// NewOutput sizes a host's gather buffers for a table of rows rows and
// touches every page of them, as a database's memory pool is faulted in
// before it serves queries. A shuffle that gathers into fresh memory pays
// a page fault per 4 KiB it receives: with a process per host on this
// guest that was about 30% of the hosts' CPU, for either transport, and
// more than the copy into them.
func NewOutput(c HostConfig, rows int) *Output {
	o := &Output{Out: make([][]byte, c.Workers), Local: make([][]byte, c.Workers), rows: rows}
	for w := range c.Workers {
		out, local := gatherSizes(c, rows, w)
		o.Out[w], o.Local[w] = make([]byte, 0, out), make([]byte, 0, local)
		pages.Touch(o.Out[w])
		pages.Touch(o.Local[w])
	}
	return o
}

// gatherSizes is the room worker w of host c is likely to need for the
// rows of other hosts and for its own: a share of its morsel, and a
// quarter more for a skewed partition.
func gatherSizes(c HostConfig, rows, w int) (out, local int) {
	lo, hi := rows*w/c.Workers, rows*(w+1)/c.Workers
	est := (hi - lo) * TupleLen / c.Hosts
	return est*(c.Hosts-1) + est/4 + 4096, est + est/4 + 4096
}

// HostResult is what one host sent and gathered.
type HostResult struct {
	// SentTo[h] is the tally of the rows this host's table holds for host
	// h (its own rows included); Gathered the rows it gathered, its own
	// and every peer's.
	SentTo   []Tally
	Gathered Tally
	// NetBytes is the tuple bytes sent to other hosts; Messages the data
	// messages.
	NetBytes, Messages uint64
	// Out is the rows gathered from other hosts and Local this host's
	// own, by worker, in row format.
	Out, Local [][]byte
}

// Partition returns the host a row with key belongs to.
func Partition(key uint64, seed uint32, hosts int) int {
	return int(uint64(Murmur3U64(key, seed)) * uint64(hosts) >> 32)
}

// RunHost shuffles t among the hosts: every worker scans its morsel of the
// table, partitions rows by the murmur3 hash of column 0, gathers its own
// host's rows locally and batches the others' into messages of as many
// tuples as fit tr.MaxMsg, sent to its buddy worker on the row's host;
// meanwhile a receiver per worker gathers what the buddies send into rows.
// Every (sender worker, receiver) stream ends with the sender's tally, and
// RunHost fails unless what arrived matches it exactly: each row exactly
// once.
func RunHost(ctx context.Context, c HostConfig, t *Table, tr Transport) (*HostResult, error) {
	W, N := c.Workers, c.Hosts
	res := &HostResult{SentTo: make([]Tally, N), Out: make([][]byte, W), Local: make([][]byte, W)}
	if N < 2 {
		return nil, fmt.Errorf("shuffle: %d hosts: give 2 or more", N)
	}
	perMsg := (tr.MaxMsg() - 2) / TupleLen
	if perMsg < 1 {
		return nil, fmt.Errorf("shuffle: messages of %d bytes hold no %d-byte tuple", tr.MaxMsg(), TupleLen)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		cancel()
	}
	rows := t.Rows()
	sent := make([][]Tally, W)
	gathered := make([]Tally, W)
	var netBytes, messages []uint64 = make([]uint64, W), make([]uint64, W)
	for w := range W {
		lo, hi := rows*w/W, rows*(w+1)/W
		if o := c.Output; o != nil && w < len(o.Out) && w < len(o.Local) {
			res.Out[w], res.Local[w] = o.Out[w][:0], o.Local[w][:0]
		} else {
			out, local := gatherSizes(c, rows, w)
			res.Out[w], res.Local[w] = make([]byte, 0, out), make([]byte, 0, local)
		}
		sent[w] = make([]Tally, N)
		wg.Add(2)
		// Receiver: gather the buddies' rows.
		go func() {
			defer wg.Done()
			type stream struct {
				got, want Tally
				ended     bool
			}
			streams := make([]stream, N)
			open := N - 1
			err := tr.Receive(ctx, w, func(peer int, m []byte) bool {
				s := &streams[peer]
				switch {
				case len(m) >= 2 && m[0] == msgData && len(m) == 2+int(m[1])*TupleLen:
					for i := range int(m[1]) {
						tup := m[2+i*TupleLen : 2+(i+1)*TupleLen]
						s.got.add(tup)
						res.Out[w] = append(res.Out[w], tup...)
					}
				case len(m) == endLen && m[0] == msgEnd && !s.ended:
					s.ended = true
					s.want = Tally{Rows: binary.LittleEndian.Uint64(m[1:]), Sum: binary.LittleEndian.Uint64(m[9:])}
				default:
					fail(fmt.Errorf("shuffle: host %d worker %d: bad message of %d bytes from host %d", c.ID, w, len(m), peer))
					return false
				}
				if s.ended && s.got.Rows >= s.want.Rows {
					if s.got != s.want {
						fail(fmt.Errorf("shuffle: host %d worker %d: from host %d got %d rows (checksum %#x), it sent %d (%#x)",
							c.ID, w, peer, s.got.Rows, s.got.Sum, s.want.Rows, s.want.Sum))
						return false
					}
					if open--; open == 0 {
						return false
					}
					s.ended = false
					s.want.Rows = ^uint64(0) // closed: later messages are errors
				}
				return true
			})
			if err != nil && !errors.Is(err, context.Canceled) {
				fail(fmt.Errorf("shuffle: host %d worker %d receive: %w", c.ID, w, err))
			}
			if open == 0 {
				for p, s := range streams {
					if p != c.ID {
						gathered[w].Merge(s.got)
					}
				}
			} else if ctx.Err() == nil {
				fail(fmt.Errorf("shuffle: host %d worker %d: %d streams never ended", c.ID, w, open))
			}
		}()
		// Sender: scan, partition, batch, send.
		go func() {
			defer wg.Done()
			// Per destination, up to batch full messages wait to go out
			// together (one UDP_SEGMENT send on the bi-channel).
			batch := 1
			if _, ok := tr.(BatchSender); ok {
				batch = sendBatch
			}
			qs := make([][][]byte, N)
			nq := make([]int, N)
			for p := range qs {
				qs[p] = make([][]byte, batch)
				for i := range qs[p] {
					qs[p][i] = make([]byte, 2, 2+perMsg*TupleLen)
					qs[p][i][0] = msgData
				}
			}
			var tup [TupleLen]byte
			send := func(p int) error {
				n := nq[p]
				if n == 0 {
					return nil
				}
				var err error
				if bs, ok := tr.(BatchSender); ok {
					err = bs.SendBatch(p, w, qs[p][:n])
				} else {
					err = tr.Send(p, w, qs[p][0])
				}
				for i := range n {
					qs[p][i] = qs[p][i][:2]
				}
				nq[p] = 0
				return err
			}
			// seal closes the message being filled; it goes out with its
			// batch.
			seal := func(p int, force bool) error {
				b := qs[p][nq[p]]
				if len(b) > 2 {
					b[1] = byte((len(b) - 2) / TupleLen)
					netBytes[w] += uint64(len(b) - 2)
					messages[w]++
					qs[p][nq[p]] = b
					nq[p]++
				}
				if nq[p] == batch || force {
					return send(p)
				}
				return nil
			}
			flush := func(p int) error { return seal(p, true) }
			key := t.Cols[0]
			for r := lo; r < hi; r++ {
				p := Partition(key[r], c.Seed, N)
				if p == c.ID {
					t.putTuple(tup[:], r)
					sent[w][p].add(tup[:])
					res.Local[w] = append(res.Local[w], tup[:]...) // gathered locally
					continue
				}
				b := qs[p][nq[p]]
				b = b[:len(b)+TupleLen]
				t.putTuple(b[len(b)-TupleLen:], r)
				sent[w][p].add(b[len(b)-TupleLen:])
				qs[p][nq[p]] = b
				if len(b) == cap(b) {
					if err := seal(p, false); err != nil {
						fail(fmt.Errorf("shuffle: host %d worker %d send to host %d: %w", c.ID, w, p, err))
						return
					}
				}
				if r&1023 == 0 && ctx.Err() != nil {
					return
				}
			}
			var end [endLen]byte
			end[0] = msgEnd
			for p := range N {
				if p == c.ID {
					continue
				}
				binary.LittleEndian.PutUint64(end[1:], sent[w][p].Rows)
				binary.LittleEndian.PutUint64(end[9:], sent[w][p].Sum)
				err := flush(p)
				if err == nil {
					err = tr.Send(p, w, end[:])
				}
				if err != nil {
					fail(fmt.Errorf("shuffle: host %d worker %d send to host %d: %w", c.ID, w, p, err))
					return
				}
			}
			if f, ok := tr.(interface{ Flush(int) error }); ok {
				if err := f.Flush(w); err != nil {
					fail(fmt.Errorf("shuffle: host %d worker %d flush: %w", c.ID, w, err))
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if o := c.Output; o != nil {
		for w := range min(W, len(o.Out), len(o.Local)) {
			o.Out[w], o.Local[w] = res.Out[w][:0], res.Local[w][:0] // keep what grew
		}
	}
	for w := range W {
		for p := range N {
			res.SentTo[p].Merge(sent[w][p])
		}
		res.Gathered.Merge(gathered[w])
		res.NetBytes += netBytes[w]
		res.Messages += messages[w]
	}
	res.Gathered.Merge(res.SentTo[c.ID])
	return res, nil
}
