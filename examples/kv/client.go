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
	// OnHalf, if set, runs once, half-way through.
	OnHalf func()
}

// Acked is an acknowledged update.
type Acked struct {
	Key, Version uint64
	Value        [ValueLen]byte
}

// LoadResult is what the client saw.
type LoadResult struct {
	Offered, Answered, Failed uint64
	Elapsed                   time.Duration // from the first send to the last answer, at least the offering's duration
	Latency                   *hist.Histogram
	Acked                     []Acked
	// OrderErrors counts dependent updates (one key, one connection)
	// whose versions did not increase in the order they were sent.
	OrderErrors uint64
	Saturated   bool
}

// Throughput is answered updates per second.
func (r *LoadResult) Throughput() float64 { return float64(r.Answered) / r.Elapsed.Seconds() }

// valueOf is the value a connection writes with request id: checkable.
func valueOf(conn int, id uint64) (v [ValueLen]byte) {
	for i := 0; i < ValueLen; i += 8 {
		binary.LittleEndian.PutUint64(v[i:], uint64(conn)<<56^id*0x9e3779b97f4a7c15^uint64(i))
	}
	return v
}

// Load offers updates at cfg.Rate for cfg.Duration and waits for the
// answers (at most 5 s more). Latency is measured from each update's
// scheduled send time, so a stalled server is charged for the updates it
// delayed (no coordinated omission).
func Load(ctx context.Context, cfg LoadConfig) (*LoadResult, error) {
	if cfg.Conns < 1 || cfg.Rate <= 0 || cfg.Keys == 0 {
		return nil, fmt.Errorf("kv: load: %d connections, rate %v, %d keys: give positive values", cfg.Conns, cfg.Rate, cfg.Keys)
	}
	if cfg.MaxOutstanding == 0 {
		cfg.MaxOutstanding = 100000
	}
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	res := &LoadResult{Latency: hist.New()}
	perConn := cfg.Rate / float64(cfg.Conns)
	// Updates go out at 0, 1, ..., n-1 intervals: n per connection fill
	// the duration (never more than rate × duration in all).
	n := max(int(perConn*cfg.Duration.Seconds()), 1)
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		errs     []error
		half     sync.Once
		start    = time.Now()
		lastDone atomic.Int64
	)
	for c := range cfg.Conns {
		conn, err := dial(ctx, "tcp", cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("kv: load: connect to %s: %w", cfg.Addr, err)
		}
		conn.(*net.TCPConn).SetNoDelay(true)
		defer conn.Close()
		sched := make([]int64, n) // ns since start, by request id
		keys := make([]uint64, n)
		var answered, sentA atomic.Int64
		var final atomic.Bool // the sender sends no more
		sent := 0
		wg.Add(2)
		go func() { // sender
			defer wg.Done()
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(c)))
			bw := bufio.NewWriterSize(conn, 16<<10)
			var b [ReqLen]byte
			interval := float64(time.Second) / perConn
			for sent < n {
				now := time.Since(start)
				due := int(float64(now)/interval) + 1
				if due > n {
					due = n
				}
				if sent-int(answered.Load()) > cfg.MaxOutstanding {
					mu.Lock()
					res.Saturated = true
					mu.Unlock()
					final.Store(true)
					break
				}
				for ; sent < due; sent++ {
					id := uint64(sent)
					k := rng.Uint64N(cfg.Keys)
					keys[id] = k
					sched[id] = int64(float64(id) * interval)
					binary.LittleEndian.PutUint64(b[:], id)
					binary.LittleEndian.PutUint64(b[8:], k)
					v := valueOf(c, id)
					copy(b[16:], v[:])
					bw.Write(b[:])
				}
				sentA.Store(int64(sent))
				if sent == n {
					final.Store(true)
				}
				if err := bw.Flush(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				if sent == n/2 && c == 0 && cfg.OnHalf != nil {
					half.Do(cfg.OnHalf)
				}
				if sent < n {
					next := time.Duration(float64(sent) * interval)
					if d := next - time.Since(start); d > 0 {
						time.Sleep(d)
					}
				}
			}
			if c == 0 && cfg.OnHalf != nil {
				half.Do(cfg.OnHalf)
			}
		}()
		go func() { // receiver
			defer wg.Done()
			br := bufio.NewReaderSize(conn, 16<<10)
			h := hist.New()
			lastVer := make(map[uint64]uint64, min(cfg.Keys, 1<<16)) // no rehash mid-measurement
			var acked []Acked
			var b [ReplyLen]byte
			var got int
			var orderErrs uint64
			conn.SetReadDeadline(time.Now().Add(cfg.Duration + 5*time.Second))
			for {
				if _, err := io.ReadFull(br, b[:]); err != nil {
					if errors.Is(err, os.ErrDeadlineExceeded) {
						// The server is saturated: what it did not answer
						// 5 s after the offering ended counts as failed.
						mu.Lock()
						res.Saturated = true
						mu.Unlock()
					} else if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) && !errors.Is(err, ctx.Err()) {
						mu.Lock()
						errs = append(errs, fmt.Errorf("kv: load: connection %d after %d answers: %w", c, got, err))
						mu.Unlock()
					}
					break
				}
				now := time.Since(start)
				id, ver := binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])
				got++
				answered.Add(1)
				h.Record(now - time.Duration(sched[id]))
				k := keys[id]
				if lastVer[k] >= ver {
					orderErrs++
				}
				lastVer[k] = ver
				if cfg.KeepAcked {
					acked = append(acked, Acked{Key: k, Version: ver, Value: valueOf(c, id)})
				}
				if final.Load() && int64(got) >= sentA.Load() {
					lastDone.Store(int64(now))
					break
				}
			}
			mu.Lock()
			res.Latency.Merge(h)
			res.Answered += uint64(got)
			res.OrderErrors += orderErrs
			res.Acked = append(res.Acked, acked...)
			res.Offered += uint64(sentA.Load())
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Duration(lastDone.Load())
	if res.Elapsed == 0 {
		res.Elapsed = time.Since(start)
	}
	// The offering itself lasts the duration: answers that all came in
	// time are the offered rate, not more.
	res.Elapsed = max(res.Elapsed, cfg.Duration)
	res.Failed = res.Offered - res.Answered
	return res, errors.Join(errs...)
}
