package bichannel

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
)

// typeCounter counts the datagrams and records a fast path sends, by
// record type, and drops credit records when dropCredits is set.
type typeCounter struct {
	transport.Path
	datagrams   atomic.Int64
	records     [dgCredit + 1]atomic.Int64
	dropCredits atomic.Bool
}

func (c *typeCounter) Send(peer, w, f int, d []byte) error {
	c.datagrams.Add(1)
	var h dgHeader
	for b := d; len(b) > 0; {
		_, rest, ok := nextRecord(b, &h)
		if !ok {
			break
		}
		c.records[h.typ].Add(1)
		b = rest
	}
	if h.typ == dgCredit && c.dropCredits.Load() {
		return nil
	}
	return c.Path.Send(peer, w, f, d)
}

func countingCluster(t *testing.T, cfg Config) ([]*Endpoint, []*typeCounter) {
	t.Helper()
	ln, err := lossytest.New(lossytest.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var cs []*typeCounter
	eps := newCluster(t, 2, cfg, func(int) transport.Path {
		fp, err := ln.NewFastPath(cfg.Workers)
		if err != nil {
			t.Fatal(err)
		}
		c := &typeCounter{Path: fp}
		cs = append(cs, c)
		return c
	})
	return eps, cs
}

// SendBatch packs small messages of one flow into as few datagrams as
// they fit, and each still arrives once, in order, with its content.
func TestSendBatchPacksRecords(t *testing.T) {
	cfg := testConfig()
	cfg.Workers, cfg.Flows, cfg.BuffersPerFlow = 1, 1, 64
	eps, cs := countingCluster(t, cfg)
	msgs := make([][]byte, 32)
	for i := range msgs {
		msgs[i] = make([]byte, 64)
		binary.BigEndian.PutUint64(msgs[i], uint64(i))
	}
	if n, err := eps[0].SendBatch(1, 0, msgs); err != nil || n != len(msgs) {
		t.Fatalf("SendBatch: %d, %v", n, err)
	}
	// 32 records of 40+64 bytes in datagrams of at most 40+1400.
	perDg := (HeaderLen + cfg.MaxPayload) / (HeaderLen + 64)
	want := (len(msgs) + perDg - 1) / perDg
	if got := cs[0].records[dgData].Load(); got != int64(len(msgs)) {
		t.Errorf("%d data records sent, want %d", got, len(msgs))
	}
	if got := cs[0].datagrams.Load(); got != int64(want) {
		t.Errorf("%d datagrams for %d messages of 64 bytes, want %d", got, len(msgs), want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []Message
	for next := 0; next < len(msgs); {
		var err error
		if got, err = eps[1].RecvWait(ctx, 0, got[:0]); err != nil {
			t.Fatalf("after %d messages: %v", next, err)
		}
		for _, m := range got {
			if i := binary.BigEndian.Uint64(m.Data); i != uint64(next) || len(m.Data) != 64 {
				t.Fatalf("message %d of %d bytes, want %d of 64", i, len(m.Data), next)
			}
			next++
		}
	}
}

// Credits come back on the fast path, in credit records; when every one
// of them is lost, the acknowledgements over TCP still return the credits
// and traffic completes exactly once.
func TestCreditsOnFastPath(t *testing.T) {
	for _, lose := range []bool{false, true} {
		name := "delivered"
		if lose {
			name = "all-lost"
		}
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			eps, cs := countingCluster(t, cfg)
			for _, c := range cs {
				c.dropCredits.Store(lose)
			}
			runTraffic(t, eps, trafficOpts{perPair: 600})
			var sent, rcvd int64
			for i, e := range eps {
				s := e.Stats()
				sent += int64(s.CreditFrames)
				rcvd += int64(s.CreditFramesReceived)
				if c := cs[i].records[dgCredit].Load(); c != int64(s.CreditFrames) {
					t.Errorf("node %d: %d credit records on the wire, Stats says %d", i, c, s.CreditFrames)
				}
			}
			if sent == 0 {
				t.Fatal("no credit record was sent on the fast path")
			}
			switch {
			case lose && rcvd != 0:
				t.Errorf("%d credit records received, all were lost", rcvd)
			case !lose && rcvd == 0:
				t.Error("no credit record was received")
			}
		})
	}
}

// A credit record returning credits for messages never sent is counted
// as a bad acknowledgement and changes nothing; an old one is ignored.
func TestCreditRecordBeyondSent(t *testing.T) {
	cfg := testConfig()
	eps, _ := countingCluster(t, cfg)
	p := eps[0].peers()[1]
	ss := p.send[0]
	ss.mu.Lock()
	before := ss.flows[1].credits
	ss.mu.Unlock()
	var rec [creditLen]byte
	binary.BigEndian.PutUint16(rec[:], 1)
	binary.BigEndian.PutUint64(rec[4:], 5) // nothing was sent on flow 1
	h := dgHeader{worker: 0}
	eps[0].onCredit(p, &h, rec[:], p.ctlAddr)
	binary.BigEndian.PutUint64(rec[4:], 0) // old news
	eps[0].onCredit(p, &h, rec[:], p.ctlAddr)
	ss.mu.Lock()
	after := ss.flows[1].credits
	ss.mu.Unlock()
	if after != before {
		t.Errorf("credits %d, were %d", after, before)
	}
	if s := eps[0].Stats(); s.BadAcks != 1 || s.CreditViolations != 0 {
		t.Errorf("BadAcks %d, CreditViolations %d: want 1 and 0", s.BadAcks, s.CreditViolations)
	}
	eps[0].st.badAcks.Store(0)
	runTraffic(t, eps, trafficOpts{perPair: 100})
}
