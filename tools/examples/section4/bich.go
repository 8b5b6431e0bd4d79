package main

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport"
)

// The bi-channel's nodes in 10(a): two more hosts on the same fabric.
var (
	bichSenderAddr   = netip.MustParseAddr("198.18.4.11")
	bichReceiverAddr = netip.MustParseAddr("198.18.4.12")
)

// bichRun is 10(a)'s bi-channel series: the library's own flow control,
// one flow whose receiver buffers credits messages (Config.BuffersPerFlow;
// its credits go back over the control path as the application takes
// messages), the receiving application taking RecvPps messages per second
// and the sender offering Load times that. The bi-channel is reliable: a
// message the fabric or the receiver's rings lost would come again over
// TCP, so its loss is the frames the fabric and the receiver's rings
// dropped (the ledger's drops and the engine's), and Resent says how many
// messages it resent.
func (e env) bichRun(s *session, c fig10aConfig, credits int) (fig10aRow, error) {
	row := fig10aRow{Window: credits}
	l0, err := s.d.ledger()
	if err != nil {
		return row, err
	}
	// Messages wait for the slow application up to credits/RecvPps before
	// they are acknowledged: a retransmission timeout above that keeps
	// the bi-channel from resending what was not lost.
	rto := max(20*time.Millisecond, 4*time.Duration(float64(credits)/c.RecvPps*float64(time.Second)))
	// The figure is about loss, not liveness: a peer is declared dead
	// only after 10 s without a heartbeat, so a sender and a receiver
	// that spin on a CPU shared with other work are not.
	base := bichannel.Config{Workers: 1, Flows: 1, BuffersPerFlow: credits, Fast: bichannel.FastVNIC, MaxPayload: max(c.Payload, 8),
		RetransmitTimeout: rto, HeartbeatTimeout: 10 * time.Second}
	var eps [2]*bichannel.Endpoint
	for i, a := range []netip.Addr{bichSenderAddr, bichReceiverAddr} {
		cfg := base
		cfg.NodeID = i
		cfg.VNIC = transport.VNICConfig{Socket: s.d.socket, Name: fmt.Sprintf("bichannel-%d", i), IP: a, FabricHost: true, BasePort: 9500,
			AttachTimeout: 10 * time.Second, AxSize: 2 * credits}
		ep, err := bichannel.New(cfg)
		if err != nil {
			return row, fmt.Errorf("bi-channel node %d on the fabric: %w", i, err)
		}
		defer ep.Close()
		eps[i] = ep
	}
	peers := []bichannel.Peer{{ID: 0, Addr: eps[0].ControlAddr()}, {ID: 1, Addr: eps[1].ControlAddr()}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	for _, ep := range eps {
		go func() { errs <- ep.Connect(ctx, peers) }()
	}
	for range eps {
		if err := <-errs; err != nil {
			return row, fmt.Errorf("bi-channel connect: %w", err)
		}
	}
	var received atomic.Uint64
	recv := newGroup()
	recv.go_(func() error {
		p := newPacer(c.RecvPps, max(32, c.RecvPps*catchUp.Seconds()))
		var msgs []bichannel.Message
		var n uint64
		for {
			select {
			case <-recv.stop:
				return nil
			default:
			}
			if p.take(1) == 0 {
				runtime.Gosched()
				continue
			}
			var err error
			msgs, err = eps[1].Recv(0, msgs[:0])
			if err != nil {
				return fmt.Errorf("bi-channel receive: %w", err)
			}
			if len(msgs) == 0 {
				runtime.Gosched()
				continue
			}
			p.used(len(msgs))
			n += uint64(len(msgs))
			received.Store(n)
		}
	})
	send := newGroup()
	var sent atomic.Uint64
	send.go_(func() error {
		msg := make([]byte, max(c.Payload, 8))
		batch := make([][]byte, 32)
		for i := range batch {
			batch[i] = msg
		}
		p := newPacer(c.Load*c.RecvPps, max(64, c.Load*c.RecvPps*catchUp.Seconds()))
		var n uint64
		for {
			select {
			case <-send.stop:
				return nil
			default:
			}
			k := p.take(len(batch))
			if k == 0 {
				runtime.Gosched()
				continue
			}
			sctx, scancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			m, err := eps[0].SendBatchContext(sctx, 1, 0, batch[:k])
			scancel()
			if err != nil && sctx.Err() == nil {
				return fmt.Errorf("bi-channel send: %w", err)
			}
			p.used(m)
			n += uint64(m)
			sent.Store(n)
			runtime.Gosched()
		}
	})
	start := time.Now()
	for t := c.Every; t <= c.Dur; t += c.Every {
		time.Sleep(time.Until(start.Add(t)))
		l, err := s.d.ledger()
		if err != nil {
			send.halt()
			recv.halt()
			return row, err
		}
		d := l.sub(l0)
		row.Samples = append(row.Samples, fig10aSample{T: time.Since(start).Seconds(), Sent: sent.Load(), Received: received.Load(), Lost: d.dropped() + d.RxDrops})
	}
	serr := send.halt()
	// Everything sent arrives (the channel is reliable): wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for received.Load() < sent.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	rerr := recv.halt()
	if serr != nil {
		return row, serr
	}
	if rerr != nil {
		return row, rerr
	}
	st := eps[0].Stats()
	row.Sent, row.Received = sent.Load(), received.Load()
	row.Resent = st.Retransmitted + st.FastRetransmitted
	if row.Received != row.Sent {
		return row, fmt.Errorf("the bi-channel sent %d messages, %d arrived", row.Sent, row.Received)
	}
	l1, err := s.d.ledger()
	if err != nil {
		return row, err
	}
	row.Ledger = l1.sub(l0)
	row.Lost = row.Ledger.dropped() + row.Ledger.RxDrops
	if !row.Ledger.balanced() {
		return row, fmt.Errorf("ledger out of balance: sent %d, delivered %d + drops %d + delayed %d", row.Ledger.Sent, row.Ledger.Delivered, row.Ledger.dropped(), row.Ledger.Delayed)
	}
	return row, nil
}
