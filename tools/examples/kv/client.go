package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/bichannel/hist"
)

// LoadConfig is one step of the load generator: an open-loop rate of
// updates spread over Conns client connections.
type LoadConfig struct {
	Addr     string
	Dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	Rate     float64       // updates per second offered
	Duration time.Duration // of offering
	Conns    int
	Keys     uint64 // keys drawn uniformly from [0, Keys)
	Seed     uint64
	// MaxOutstanding stops offering on a connection with this many
	// unanswered updates (the server is saturated); 0: 100000.
	MaxOutstanding int
	// KeepAcked records every acknowledged update (for Cluster.Check).
	KeepAcked bool
	// KeepTimes records each update's scheduled, send and answer times
	// (LoadResult.Times).
	KeepTimes bool
	// OnHalf, if set, runs once, half-way through.
	OnHalf func()

	sleepPacing bool // pace with time.Sleep alone (tests: the baseline)
}

// Acked is an acknowledged update.
type Acked struct {
	Key, Version uint64
	Value        [ValueLen]byte
}

// RequestTimes is one update's life, since the load's start.
type RequestTimes struct {
	Scheduled, Sent, Done time.Duration // Done is 0 if no answer came
}

// LoadResult is what the client saw.
type LoadResult struct {
	Offered, Answered, Failed uint64
	Elapsed                   time.Duration // from the first send to the last answer, at least the offering's duration
	// Service is the latency from each update's actual send (its write to
	// the connection) to its answer: what the server and the network took.
	Service *hist.Histogram
	// FromSchedule is the latency from each update's scheduled send time
	// to its answer: it adds the time an update waited to be sent, behind
	// a late load generator or a send that blocked, so a stall is charged
	// to every update it delayed (coordinated omission shown, not hidden).
	FromSchedule *hist.Histogram
	// Lag is the load generator's schedule lag: actual − scheduled send.
	Lag *hist.Histogram
	// Times is, with KeepTimes, each connection's updates by request id.
	Times [][]RequestTimes
	Acked []Acked
	// OrderErrors counts dependent updates (one key, one connection)
	// whose versions did not increase in the order they were sent.
	OrderErrors uint64
	Saturated   bool
}

// Throughput is answered updates per second.
func (r *LoadResult) Throughput() float64 { return float64(r.Answered) / r.Elapsed.Seconds() }

// LagLimit is the share of the service p50 that the schedule lag's p99
// may reach before a run is marked: beyond it the load generator, not the
// system under test, shapes the figures.
const LagLimit = 0.1

// LagWarning reports whether the load generator's schedule lag p99
// exceeded a tenth of the measured service p50, and a sentence saying so
// (empty if not). The p99, not the p50, so that a run whose sends came in
// late bursts is marked even if most sends were on time.
func (r *LoadResult) LagWarning() (bool, string) {
	lag, p50 := r.Lag.Quantile(0.99), r.Service.Quantile(0.5)
	if r.Lag.Count() == 0 || float64(lag) <= LagLimit*float64(p50) {
		return false, ""
	}
	return true, fmt.Sprintf("load generator lag p99 %v exceeds a tenth of the service p50 %v: the schedule, not the server, shaped this run", lag.Round(time.Microsecond), p50.Round(time.Microsecond))
}

// valueOf is the value a connection writes with request id: checkable.
func valueOf(conn int, id uint64) (v [ValueLen]byte) {
	for i := 0; i < ValueLen; i += 8 {
		binary.LittleEndian.PutUint64(v[i:], uint64(conn)<<56^id*0x9e3779b97f4a7c15^uint64(i))
	}
	return v
}

// loadConn is one client connection's state. The sender writes sched,
// sent and keys of request ids below sentN before it publishes sentN; the
// receiver loads sentN before it reads them (an answer comes only after
// its request was published).
type loadConn struct {
	conn     net.Conn
	bw       *bufio.Writer
	rng      *rand.Rand
	sched    []int64 // ns since start, by request id
	sent     []int64
	done     []int64 // with KeepTimes
	keys     []uint64
	next     int // sender: the next request id
	flushed  int // sender: ids below are published and flushed
	sentN    atomic.Int64
	answered atomic.Int64
	final    atomic.Bool // the sender sends no more
}

// Load offers updates at cfg.Rate for cfg.Duration and waits for the
// answers (at most 5 s more). One sender paces every connection: update k
// is scheduled at k/Rate and goes to connection k mod Conns. Each update's
// latency is measured both from its actual send (Service) and from its
// scheduled time (FromSchedule), with the pacing's own lag beside them.
func Load(ctx context.Context, cfg LoadConfig) (*LoadResult, error) {
	if cfg.Conns < 1 || cfg.Rate <= 0 || cfg.Keys == 0 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("kv: load: %d connections, rate %v, %d keys, duration %v: give positive values", cfg.Conns, cfg.Rate, cfg.Keys, cfg.Duration)
	}
	if cfg.MaxOutstanding == 0 {
		cfg.MaxOutstanding = 100000
	}
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	res := &LoadResult{Service: hist.New(), FromSchedule: hist.New(), Lag: hist.New()}
	// n updates per connection fill the duration (never more than
	// rate × duration in all).
	n := max(int(cfg.Rate/float64(cfg.Conns)*cfg.Duration.Seconds()), 1)
	cs := make([]*loadConn, cfg.Conns)
	for c := range cs {
		conn, err := dial(ctx, "tcp", cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("kv: load: connect to %s: %w", cfg.Addr, err)
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		defer conn.Close()
		lc := &loadConn{conn: conn, bw: bufio.NewWriterSize(conn, 16<<10), rng: rand.New(rand.NewPCG(cfg.Seed, uint64(c))),
			sched: make([]int64, n), sent: make([]int64, n), keys: make([]uint64, n)}
		if cfg.KeepTimes {
			lc.done = make([]int64, n)
		}
		cs[c] = lc
	}
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		errs     []error
		lastDone int64
		start    = time.Now()
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for c, lc := range cs {
		wg.Add(1)
		go func() { // receiver
			defer wg.Done()
			got, done := receive(ctx, cfg, c, lc, start, res, &mu, fail)
			mu.Lock()
			lastDone = max(lastDone, done)
			res.Answered += uint64(got)
			res.Offered += uint64(lc.sentN.Load())
			mu.Unlock()
		}()
	}
	send(cfg, cs, n, start, res, &mu, fail)
	wg.Wait()
	res.Elapsed = time.Duration(lastDone)
	if res.Elapsed == 0 {
		res.Elapsed = time.Since(start)
	}
	// The offering itself lasts the duration: answers that all came in
	// time are the offered rate, not more.
	res.Elapsed = max(res.Elapsed, cfg.Duration)
	res.Failed = res.Offered - res.Answered
	if cfg.KeepTimes {
		res.Times = make([][]RequestTimes, len(cs))
		for c, lc := range cs {
			ts := make([]RequestTimes, lc.sentN.Load())
			for id := range ts {
				ts[id] = RequestTimes{Scheduled: time.Duration(lc.sched[id]), Sent: time.Duration(lc.sent[id]), Done: time.Duration(lc.done[id])}
			}
			res.Times[c] = ts
		}
	}
	return res, errors.Join(errs...)
}

// send paces every update of every connection, writing the updates due at
// each wake-up (one, when the pacing keeps up; a burst after a late wake)
// and recording each one's send time just before its connection's flush.
func send(cfg LoadConfig, cs []*loadConn, n int, start time.Time, res *LoadResult, mu *sync.Mutex, fail func(error)) {
	p := pacer{start: start, sleepOnly: cfg.sleepPacing}
	total := n * len(cs)
	interval := float64(time.Second) / cfg.Rate
	schedOf := func(k int) int64 { return int64(float64(k) * interval) }
	lag := hist.New()
	var half sync.Once
	var b [ReqLen]byte
	stop := func() {
		for _, lc := range cs {
			lc.final.Store(true)
		}
	}
	defer func() {
		mu.Lock()
		res.Lag.Merge(lag)
		mu.Unlock()
		if cfg.OnHalf != nil {
			half.Do(cfg.OnHalf)
		}
	}()
	for k := 0; k < total; {
		now := int64(p.wait(time.Duration(schedOf(k))))
		for ; k < total && schedOf(k) <= now; k++ {
			c := k % len(cs)
			lc := cs[c]
			if lc.bw.Available() < ReqLen {
				break // flush (and publish) first: bufio would send it unpublished
			}
			id := lc.next
			lc.next++
			key := lc.rng.Uint64N(cfg.Keys)
			lc.keys[id] = key
			lc.sched[id] = schedOf(k)
			binary.LittleEndian.PutUint64(b[:], uint64(id))
			binary.LittleEndian.PutUint64(b[8:], key)
			v := valueOf(c, uint64(id))
			copy(b[16:], v[:])
			lc.bw.Write(b[:])
		}
		for _, lc := range cs {
			if lc.next == lc.flushed {
				continue
			}
			if lc.flushed-int(lc.answered.Load()) > cfg.MaxOutstanding {
				mu.Lock()
				res.Saturated = true
				mu.Unlock()
				stop()
				return
			}
			t := int64(time.Since(start))
			for id := lc.flushed; id < lc.next; id++ {
				lc.sent[id] = t
				lag.Record(time.Duration(t - lc.sched[id]))
			}
			lc.flushed = lc.next
			lc.sentN.Store(int64(lc.next))
			if lc.next == n {
				lc.final.Store(true) // after sentN: a receiver that sees final sees every update
			}
			if err := lc.bw.Flush(); err != nil {
				fail(fmt.Errorf("kv: load: send: %w", err))
				stop()
				for _, lc := range cs {
					lc.conn.Close() // the receivers end
				}
				return
			}
		}
		if k >= total/2 && cfg.OnHalf != nil {
			half.Do(cfg.OnHalf)
		}
	}
}

// receive reads connection c's answers until the sender is done and every
// published update is answered, the connection fails, or 5 s after the
// offering ended. It returns the answers and the time of the last one.
func receive(ctx context.Context, cfg LoadConfig, c int, lc *loadConn, start time.Time, res *LoadResult, mu *sync.Mutex, fail func(error)) (got int, last int64) {
	br := bufio.NewReaderSize(lc.conn, 16<<10)
	svc, fromSched := hist.New(), hist.New()
	lastVer := make(map[uint64]uint64, min(cfg.Keys, 1<<16)) // no rehash mid-measurement
	var acked []Acked
	var b [ReplyLen]byte
	var orderErrs uint64
	lc.conn.SetReadDeadline(time.Now().Add(cfg.Duration + 5*time.Second))
	for {
		if _, err := io.ReadFull(br, b[:]); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// The server is saturated: what it did not answer
				// 5 s after the offering ended counts as failed.
				mu.Lock()
				res.Saturated = true
				mu.Unlock()
			} else if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) && !errors.Is(err, ctx.Err()) {
				fail(fmt.Errorf("kv: load: connection %d after %d answers: %w", c, got, err))
			}
			break
		}
		now := int64(time.Since(start))
		published := int(lc.sentN.Load())
		id, ver := binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])
		if id >= uint64(published) {
			fail(fmt.Errorf("kv: load: connection %d: answer for request %d, which was not sent (%d were)", c, id, published))
			break
		}
		got++
		lc.answered.Add(1)
		svc.Record(time.Duration(now - lc.sent[id]))
		fromSched.Record(time.Duration(now - lc.sched[id]))
		if lc.done != nil {
			lc.done[id] = now
		}
		k := lc.keys[id]
		if lastVer[k] >= ver {
			orderErrs++
		}
		lastVer[k] = ver
		if cfg.KeepAcked {
			acked = append(acked, Acked{Key: k, Version: ver, Value: valueOf(c, id)})
		}
		last = now
		if lc.final.Load() && int64(got) >= lc.sentN.Load() {
			break
		}
	}
	mu.Lock()
	res.Service.Merge(svc)
	res.FromSchedule.Merge(fromSched)
	res.OrderErrors += orderErrs
	res.Acked = append(res.Acked, acked...)
	mu.Unlock()
	return got, last
}
