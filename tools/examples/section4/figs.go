package main

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/rss"
)

// env is what every figure runs with: the vnicd binary and the placement.
type env struct {
	vnicd             string
	engineCPU, appCPU int
	log               func(format string, args ...any)
}

// frameLen is the length of a frame with payload bytes of UDP payload.
func frameLen(payload int) int { return hdrLen + payload }

// bufFor is the packet buffer size (a multiple of 64) a frame needs.
func bufFor(payload int) int { return max(2048, (frameLen(payload)+63)/64*64) }

// burst is every fabric bucket's depth (--fabric-burst).
const burst = 400 * time.Millisecond

// session is one vnicd and the sender and receiver hosts on it.
type session struct {
	d        *daemon
	snd, rcv *client.Tenant
	restore  func()
	primed   bool // a point ran: the buffers are faulted in
	log      func(format string, args ...any)
}

func (s *session) close() {
	if s.snd != nil {
		s.snd.Close()
	}
	if s.rcv != nil {
		s.rcv.Close()
	}
	s.d.stop()
	if s.restore != nil {
		s.restore()
	}
}

// open starts vnicd with model on the engine's CPU, then moves this
// process to the application CPU (vnicd keeps the mask it started with)
// and attaches the hosts.
func (e env) open(payload int, model []string, snd, rcv hostSpec) (*session, error) {
	d, err := startDaemon(e.vnicd, e.engineCPU, bufFor(payload), model)
	if err != nil {
		return nil, err
	}
	s := &session{d: d, log: e.log}
	if e.appCPU >= 0 {
		restore, err := placeProcess(e.appCPU)
		if err != nil {
			s.close()
			return nil, err
		}
		s.restore = restore
	}
	if s.snd, err = attach(d.socket, snd); err == nil {
		if rcv.name != "" {
			s.rcv, err = attach(d.socket, rcv)
		}
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func senderSpec(queues, payload int) hostSpec {
	// A TX ring of 2048 frames rides out an engine that waits tens of
	// milliseconds for its CPU on a loaded machine.
	return hostSpec{name: "sender", addr: senderAddr, queues: queues, portLo: creditPort, portHi: creditPort,
		axSize: 64, bxSize: 64, txSize: 2048, buffers: queues*(2048+128) + 256}
}

func receiverSpec(queues, ax int) hostSpec {
	bx := max(256, ax)
	return hostSpec{name: "receiver", addr: receiverAddr, queues: queues, portLo: dataPortLo, portHi: dataPortHi,
		axSize: ax, bxSize: bx, txSize: 64, buffers: queues*ax + 2*bx + 256}
}

func gbps(pps float64, payload int) float64 { return pps * float64(frameLen(payload)) * 8 / 1e9 }

// fabricModel is vnicd's model flags: these, after --fabric-burst. Every
// bucket holds burst of traffic at its rate: the engine takes a sender's
// TX ring in batches stamped with one clock reading, and a batch of 8 KiB
// frames (or an engine that waited for its CPU a moment) must not look
// like a burst over the limit.
func fabricModel(flags ...string) []string {
	return append([]string{"--fabric-burst=" + burst.String()}, flags...)
}

func modelFlag(name string, v float64) string { return fmt.Sprintf("--%s=%.6g", name, v) }

// ---- Figure 8 ----

// fig8Config is Figure 8's model and sweep.
type fig8Config struct {
	Payload  int     // UDP payload bytes (the paper: 8 KiB datagrams)
	FlowPps  float64 // each port pair's limit, in frames of that size per second
	NICFlows float64 // the sending host's NIC cap, in flow limits (the paper: 200/8 = 25)
	Offer    float64 // each pair offers this times the flow limit, at most this times the cap in all (0: the sender sends as fast as it can)
	Pairs    []int
	Warm     time.Duration
	Dur      time.Duration
}

type fig8Row struct {
	Pairs    int
	Expected float64 // min(pairs x flow limit, NIC cap), frames/s
	result
}

func (e env) fig8(c fig8Config) ([]fig8Row, []string, error) {
	flowG := gbps(c.FlowPps, c.Payload)
	model := fabricModel(modelFlag("fabric-flow-gbps", flowG), modelFlag("fabric-nic-gbps", flowG*c.NICFlows))
	s, err := e.open(c.Payload, model, senderSpec(1, c.Payload), receiverSpec(1, 2048))
	if err != nil {
		return nil, model, err
	}
	defer s.close()
	capPps := c.FlowPps * c.NICFlows
	var rows []fig8Row
	for _, n := range c.Pairs {
		frames := make([][]byte, n)
		for i := range frames {
			frames[i] = udp(senderAddr, receiverAddr, uint16(10000+i), uint16(dataPortLo+i), c.Payload)
		}
		offer := min(float64(n)*c.Offer*c.FlowPps, c.Offer*capPps)
		r, err := measure(s, load{frames: [][][]byte{frames}, pps: []float64{offer}}, c.Warm, c.Dur)
		if err != nil {
			return rows, model, fmt.Errorf("fig 8, %d pairs: %w", n, err)
		}
		row := fig8Row{Pairs: n, Expected: min(float64(n)*c.FlowPps, capPps), result: r}
		e.log("fig 8: %3d pairs: offered %8.0f fps, sent %8.0f fps; %8.0f fps (%.3f Gbit/s) at the receiver, fabric delivered %8.0f fps, model %8.0f fps; drops flow %d nic %d rx %d",
			n, r.Offered, float64(r.Sent)/r.SendSecs, r.RxPps, r.RxGbps, r.LedgerPps, row.Expected, r.Ledger.Drops["flow_limit"], r.Ledger.Drops["nic_cap"], r.Ledger.RxDrops)
		rows = append(rows, row)
	}
	return rows, model, nil
}

// ---- Figure 9(a) ----

type fig9aConfig struct {
	Payload int
	DPUs    int
	DPUPps  float64
	Offer   float64 // each sender thread (or flow) offers this times one DPU's rate (0: as fast as it can)
	Threads []int   // one flow, this many sender threads
	Flows   []int   // this many flows
	Warm    time.Duration
	Dur     time.Duration
}

type fig9aRow struct {
	Series string // "threads" (one flow) or "flows"
	N      int
	result
}

func (e env) fig9a(c fig9aConfig) ([]fig9aRow, []string, error) {
	model := fabricModel(fmt.Sprintf("--fabric-dpus=%d", c.DPUs), modelFlag("fabric-dpu-pps", c.DPUPps))
	maxT := 1
	for _, t := range c.Threads {
		maxT = max(maxT, t)
	}
	s, err := e.open(c.Payload, model, senderSpec(maxT, c.Payload), receiverSpec(1, 4096))
	if err != nil {
		return nil, model, err
	}
	defer s.close()
	var rows []fig9aRow
	one := [][]byte{udp(senderAddr, receiverAddr, 10000, dataPortLo, c.Payload)}
	for _, t := range c.Threads {
		l := load{}
		for range t {
			l.frames = append(l.frames, one)
			l.pps = append(l.pps, c.Offer*c.DPUPps)
		}
		r, err := measure(s, l, c.Warm, c.Dur)
		if err != nil {
			return rows, model, fmt.Errorf("fig 9a, one flow, %d threads: %w", t, err)
		}
		e.log("fig 9a: one flow, %d sender threads: %8.0f fps at the receiver (DPU rate %.0f); dpu drops %d", t, r.RxPps, c.DPUPps, r.Ledger.Drops["dpu_limit"])
		rows = append(rows, fig9aRow{Series: "threads", N: t, result: r})
	}
	for _, f := range c.Flows {
		frames := make([][]byte, f)
		for i := range frames {
			frames[i] = udp(senderAddr, receiverAddr, uint16(10000+i), dataPortLo, c.Payload)
		}
		r, err := measure(s, load{frames: [][][]byte{frames}, pps: []float64{float64(f) * c.Offer * c.DPUPps}}, c.Warm, c.Dur)
		if err != nil {
			return rows, model, fmt.Errorf("fig 9a, %d flows: %w", f, err)
		}
		e.log("fig 9a: %3d flows: %8.0f fps at the receiver (%.1f DPUs' worth); dpu drops %d", f, r.RxPps, r.RxPps/c.DPUPps, r.Ledger.Drops["dpu_limit"])
		rows = append(rows, fig9aRow{Series: "flows", N: f, result: r})
	}
	return rows, model, nil
}

// ---- Figure 9(b) ----

type fig9bConfig struct {
	Payload  int
	Queues   int     // the receiver's queues
	QueuePps float64 // one queue's rate: what its core processes per second
	Flows    int     // flows per point
	Offer    float64 // offered load, times the serving queues' rate (0: as fast as the sender can)
	Serving  []int   // queues the flows are meant for (x axis)
	Warm     time.Duration
	Dur      time.Duration
}

type fig9bRow struct {
	Series  string // "one-queue" or "targeted"
	Serving int
	result
}

// rssConfig turns the RSS configuration vnicd reported into an rss.Config.
func rssConfig(info client.RSSInfo, queues int) (rss.Config, error) {
	name := info.Profile
	if name == "" {
		name = rss.ProfileToeplitz
	}
	p, err := rss.ParseProfile(name, rss.Key(info.Key))
	if err != nil {
		return rss.Config{}, err
	}
	nq := queues
	for _, q := range info.RETA {
		nq = max(nq, int(q)+1)
	}
	size := len(info.RETA)
	if size == 0 {
		size = rss.DefaultRETASize
	}
	reta, err := rss.NewRETA(size, nq)
	if err != nil {
		return rss.Config{}, err
	}
	for i, q := range info.RETA {
		if err := reta.Set(i, int(q)); err != nil {
			return rss.Config{}, err
		}
	}
	return rss.Config{Profile: p, RETA: reta}, nil
}

func (e env) fig9b(c fig9bConfig) ([]fig9bRow, []string, error) {
	model := fabricModel()
	s, err := e.open(c.Payload, model, senderSpec(1, c.Payload), receiverSpec(c.Queues, 512))
	if err != nil {
		return nil, model, err
	}
	defer s.close()
	cfg, err := rssConfig(s.rcv.RSS, c.Queues)
	if err != nil {
		return nil, model, fmt.Errorf("fig 9b: the receiver's RSS: %w", err)
	}
	pp, err := rss.NewPortPicker(cfg, senderAddr, receiverAddr)
	if err != nil {
		return nil, model, fmt.Errorf("fig 9b: %w", err)
	}
	opts := rss.PickOptions{MinPort: dataPortLo, MaxPort: dataPortHi, FixedDstPort: dataPortLo}
	var rows []fig9bRow
	for _, series := range []string{"one-queue", "targeted"} {
		for _, k := range c.Serving {
			var pairs []rss.PortPair
			if series == "one-queue" {
				opts.MinPort, opts.MaxPort = 10000, 60000
				pairs, err = pp.Pick(0, c.Flows, opts)
			} else {
				opts.MinPort, opts.MaxPort = 10000, 60000
				for q := range k {
					var p []rss.PortPair
					p, err = pp.Pick(q, (c.Flows+k-1)/k, opts)
					if err != nil {
						break
					}
					pairs = append(pairs, p...)
				}
			}
			if err != nil {
				return rows, model, fmt.Errorf("fig 9b: pick ports: %w", err)
			}
			// Interleave the queues' flows so every queue is offered load
			// evenly within a batch.
			frames := make([][]byte, 0, len(pairs))
			for _, p := range interleave(pairs, k, series == "targeted") {
				frames = append(frames, udp(senderAddr, receiverAddr, p.SrcPort, p.DstPort, c.Payload))
			}
			offer := c.Offer * float64(k) * c.QueuePps
			r, err := measure(s, load{frames: [][][]byte{frames}, pps: []float64{offer}, budget: c.QueuePps}, c.Warm, c.Dur)
			if err != nil {
				return rows, model, fmt.Errorf("fig 9b, %s, %d queues: %w", series, k, err)
			}
			e.log("fig 9b: %-9s %d queues: %8.0f fps processed (one queue's rate %.0f), per queue %.0f", series, k, r.RxPps, c.QueuePps, r.PerQueuePps)
			rows = append(rows, fig9bRow{Series: series, Serving: k, result: r})
		}
	}
	return rows, model, nil
}

// interleave orders pairs picked k-per-queue round-robin over the queues.
func interleave(pairs []rss.PortPair, k int, on bool) []rss.PortPair {
	if !on || k <= 1 {
		return pairs
	}
	per := (len(pairs) + k - 1) / k
	out := make([]rss.PortPair, 0, len(pairs))
	for i := range per {
		for q := range k {
			if j := q*per + i; j < len(pairs) {
				out = append(out, pairs[j])
			}
		}
	}
	return out
}

// ---- Figure 10(a) ----

type fig10aConfig struct {
	Payload int
	RecvPps float64 // the receiver's rate
	Load    float64 // the sender offers this times the receiver's rate
	Buffers []int   // Ax ring sizes (queue buffers) without flow control
	Window  int     // messages in flight with flow control (the bi-channel's credits)
	Dur     time.Duration
	Every   time.Duration // sample interval
	// Bichannel adds a series with the bi-channel library's own credits
	// (Window of them) on two more fabric hosts.
	Bichannel bool
}

type fig10aSample struct {
	T                    float64
	Sent, Received, Lost uint64
}

type fig10aRow struct {
	Series  string
	Buffers int
	Window  int
	Samples []fig10aSample
	// Final: after the sender stopped and the receiver drained.
	Sent, Received, Lost uint64
	Resent               uint64 // the bi-channel's resent messages
	Ledger               ledger
	// RecvLead is how long before the samples' time 0 the receiver (and
	// its pacer) may have started: a sample at T saw what the receiver
	// took in at most T + RecvLead. MaxAhead, with flow control, is the
	// most messages the sender had sent beyond those the receiver had
	// processed (window.maxAhead). Neither is in the CSV; the tests bound
	// them by the model.
	RecvLead time.Duration
	MaxAhead uint64
}

func (e env) fig10a(c fig10aConfig) ([]fig10aRow, []string, error) {
	type run struct {
		name   string
		ax     int
		window int
	}
	var runs []run
	for _, b := range c.Buffers {
		runs = append(runs, run{fmt.Sprintf("no flow control, %d buffers", b), b, 0})
	}
	fcAx := 2
	for fcAx < 2*c.Window {
		fcAx *= 2
	}
	runs = append(runs, run{fmt.Sprintf("%d in flight (credits), %d buffers", c.Window, fcAx), fcAx, c.Window})
	model := fabricModel()
	s, err := e.open(c.Payload, model, senderSpec(1, c.Payload), hostSpec{})
	if err != nil {
		return nil, model, err
	}
	defer s.close()
	var rows []fig10aRow
	for _, rn := range runs {
		row, err := e.lossRun(s, c, rn.ax, rn.window)
		if err != nil {
			return rows, model, fmt.Errorf("fig 10a, %s: %w", rn.name, err)
		}
		row.Series = rn.name
		row.Buffers = rn.ax
		e.log("fig 10a: %-40s sent %d received %d lost %d (%.1f%%); fabric drops %d, receiver drops %d",
			rn.name, row.Sent, row.Received, row.Lost, 100*float64(row.Lost)/float64(max(row.Sent, 1)), row.Ledger.dropped(), row.Ledger.RxDrops)
		rows = append(rows, row)
	}
	if c.Bichannel {
		name := fmt.Sprintf("bi-channel, %d credits", c.Window)
		row, err := e.bichRun(s, c, c.Window)
		if err != nil {
			return rows, model, fmt.Errorf("fig 10a, %s: %w", name, err)
		}
		row.Series = name
		e.log("fig 10a: %-40s sent %d received %d lost %d, resent %d; fabric drops %d, receiver drops %d",
			name, row.Sent, row.Received, row.Lost, row.Resent, row.Ledger.dropped(), row.Ledger.RxDrops)
		rows = append(rows, row)
	}
	return rows, model, nil
}

// lossRun sends one flow of sequenced messages at Load times the
// receiver's rate to a fresh receiver host with ax buffers; with inFlight >
// 0 the receiver returns credits and the sender keeps at most inFlight
// messages in flight.
func (e env) lossRun(s *session, c fig10aConfig, ax, inFlight int) (fig10aRow, error) {
	row := fig10aRow{Buffers: ax, Window: inFlight}
	rcv, err := attach(s.d.socket, receiverSpec(1, ax))
	if err != nil {
		return row, err
	}
	defer rcv.Close()
	l0, err := s.d.ledger()
	if err != nil {
		return row, err
	}
	frame := udp(senderAddr, receiverAddr, 10000, dataPortLo, max(c.Payload, 8))
	credit := udp(receiverAddr, senderAddr, creditPort, creditPort, 8)
	var win *window
	if inFlight > 0 {
		win = &window{size: uint64(inFlight)}
	}
	var received, maxSeq atomic.Uint64 // maxSeq is the highest sequence + 1
	if win != nil {
		win.processed = &received
	}
	var sent sentCount
	var fast atomic.Bool // drain at full speed (the sender stopped)
	begin := time.Now()  // before the receiver's pacer starts
	recv := newGroup()
	recv.go_(func() error {
		q := rcv.Queue(0)
		pkts := make([]client.Packet, 0, 32)
		p := newPacer(c.RecvPps, 32)
		cr := [][]byte{append([]byte(nil), credit...)}
		var n uint64
		for {
			select {
			case <-recv.stop:
				return nil
			default:
			}
			if !fast.Load() && p.take(1) == 0 {
				runtime.Gosched()
				continue
			}
			pkts, err = q.Recv(pkts[:0])
			if len(pkts) == 0 {
				runtime.Gosched()
				continue
			}
			for _, pk := range pkts {
				if len(pk.Data) >= hdrLen+8 {
					if sq := binary.LittleEndian.Uint64(pk.Data[hdrLen:]) + 1; sq > maxSeq.Load() {
						maxSeq.Store(sq)
					}
				}
			}
			p.used(len(pkts))
			n += uint64(len(pkts))
			received.Store(n)
			if err := q.Release(pkts); err != nil {
				return fmt.Errorf("release: %w", err)
			}
			if win != nil {
				binary.LittleEndian.PutUint64(cr[0][hdrLen:], n)
				for {
					k, err := q.Send(cr)
					if err != nil {
						return fmt.Errorf("send credits: %w", err)
					}
					if k == 1 {
						break
					}
					runtime.Gosched()
				}
			}
		}
	})
	var poll func() error
	if win != nil {
		// The sender's receive queue takes the credits, on the sending
		// goroutine.
		q := s.snd.Queue(0)
		pkts := make([]client.Packet, 0, 32)
		poll = func() error {
			pkts, _ = q.Recv(pkts[:0])
			if len(pkts) == 0 {
				return nil
			}
			for _, pk := range pkts {
				if len(pk.Data) >= hdrLen+8 {
					if v := binary.LittleEndian.Uint64(pk.Data[hdrLen:]); v > win.credited.Load() {
						win.credited.Store(v)
					}
				}
			}
			if err := q.Release(pkts); err != nil {
				return fmt.Errorf("release credits: %w", err)
			}
			return nil
		}
	}
	send := newGroup()
	send.go_(func() error {
		return sendFlows(s.snd.Queue(0), [][]byte{frame}, c.Load*c.RecvPps, true, win, poll, send.stop, &sent)
	})
	start := time.Now()
	row.RecvLead = start.Sub(begin)
	for t := c.Every; t <= c.Dur; t += c.Every {
		time.Sleep(time.Until(start.Add(t)))
		r, m := received.Load(), maxSeq.Load()
		row.Samples = append(row.Samples, fig10aSample{T: time.Since(start).Seconds(), Sent: sent.n.Load(), Received: r, Lost: m - min(m, r)})
	}
	serr := send.halt()
	fast.Store(true)
	drainTx(s.d, s.snd, 1, l0.Sent+sent.n.Load())
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		l, err := s.d.ledger()
		if err == nil && l.Sent-l0.Sent >= sent.n.Load() && received.Load()+(l.sub(l0).dropped()+l.sub(l0).RxDrops) >= sent.n.Load() {
			break
		}
	}
	time.Sleep(50 * time.Millisecond)
	rerr := recv.halt()
	if serr != nil {
		return row, serr
	}
	if rerr != nil {
		return row, rerr
	}
	l1, err := s.d.ledger()
	if err != nil {
		return row, err
	}
	row.Ledger = l1.sub(l0)
	row.Sent, row.Received = sent.n.Load(), received.Load()
	row.Lost = row.Sent - min(row.Sent, row.Received)
	if win != nil {
		row.MaxAhead = win.maxAhead.Load()
	}
	if !row.Ledger.balanced() {
		return row, fmt.Errorf("ledger out of balance: sent %d, delivered %d + drops %d + delayed %d", row.Ledger.Sent, row.Ledger.Delivered, row.Ledger.dropped(), row.Ledger.Delayed)
	}
	return row, nil
}
