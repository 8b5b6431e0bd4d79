package xsk

import (
	"errors"
	"fmt"
)

// Registrar puts a bound socket into the XSKMAP that the XDP program
// redirects through (*bpf.Objects implements it).
type Registrar interface {
	Register(queue, fd int) error
}

// SourceConfig configures NewSource.
type SourceConfig struct {
	// Ifindex is the interface, in the calling thread's network namespace.
	Ifindex int
	// Queues are the RX queues to open, one socket each.
	Queues []int
	// Socket configures every socket; the zero value means DefaultConfig
	// (RX-only). Set TxSize to be able to Send.
	Socket Config
	// Map, when set, registers each socket for its queue after it is bound
	// and its fill ring is full.
	Map Registrar
}

// Source receives from (and may send through) one AF_XDP socket per RX
// queue, each with its own UMEM. It implements the engine's frame source:
// Recv(dst [][]byte) ([][]byte, error).
//
// One goroutine may call Recv and Poll while another calls Send; neither
// may be called concurrently with itself or with Close. Stats may be called
// at any time before Close.
type Source struct {
	socks  []*Socket
	tx     []*Socket
	next   int // first queue of the next Recv
	txNext int // first TX socket of the next Send
	closed bool
	poll   pollState
}

// NewSource opens one socket per queue on cfg.Ifindex with a UMEM of
// FillSize+TxSize chunks each, and registers them with cfg.Map.
func NewSource(cfg SourceConfig) (*Source, error) {
	sc := cfg.Socket
	if sc == (Config{}) {
		sc = DefaultConfig()
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if sc.RxSize == 0 {
		return nil, errors.New("xsk: source: RxSize is 0: a source receives, set RxSize")
	}
	if len(cfg.Queues) == 0 {
		return nil, errors.New("xsk: source: no queues: list the RX queues to open in SourceConfig.Queues")
	}
	seen := map[int]bool{}
	for _, q := range cfg.Queues {
		if q < 0 || seen[q] {
			return nil, fmt.Errorf("xsk: source: queue %d is negative or listed twice", q)
		}
		seen[q] = true
	}
	d := sc.withDefaults()
	chunks := d.rxChunks() + d.txChunks()
	s := &Source{}
	for _, q := range cfg.Queues {
		u, err := NewUMEM(d.ChunkSize, chunks)
		if err != nil {
			s.Close()
			return nil, err
		}
		sk, err := open(cfg.Ifindex, q, u, true, sc)
		if err != nil {
			u.Close()
			s.Close()
			return nil, err
		}
		s.socks = append(s.socks, sk)
		if sk.tx != nil {
			s.tx = append(s.tx, sk)
		}
		if cfg.Map != nil {
			if err := cfg.Map.Register(q, sk.FD()); err != nil {
				s.Close()
				return nil, err
			}
		}
	}
	s.initPoll()
	return s, nil
}

// newSourceFrom wraps open sockets (tests).
func newSourceFrom(socks []*Socket) *Source {
	s := &Source{socks: socks}
	for _, sk := range socks {
		if sk.tx != nil {
			s.tx = append(s.tx, sk)
		}
	}
	s.initPoll()
	return s
}

// Sockets are the per-queue sockets, in SourceConfig.Queues order.
func (s *Source) Sockets() []*Socket { return s.socks }

// Mode is the bind mode of the sockets (they all share the interface).
func (s *Source) Mode() BindMode {
	if len(s.socks) == 0 {
		return BindAuto
	}
	return s.socks[0].mode
}

// Recv returns the chunks of the previous batch to their fill rings (one
// producer store per queue), then appends up to cap(dst)-len(dst) frames
// (DefaultBatch when dst has no spare capacity), taking from the queues'
// RX rings round-robin: each call starts one queue further. The frames
// alias the UMEMs and stay valid until the next Recv. It does not block
// (see Poll) and allocates nothing.
func (s *Source) Recv(dst [][]byte) ([][]byte, error) {
	if s.closed {
		return dst, ErrClosed
	}
	for _, sk := range s.socks {
		sk.refill()
	}
	budget := cap(dst) - len(dst)
	if budget <= 0 {
		budget = DefaultBatch
	}
	n := len(s.socks)
	start := s.next
	if s.next++; s.next >= n {
		s.next = 0
	}
	for i := 0; i < n && budget > 0; i++ {
		j := start + i
		if j >= n {
			j -= n
		}
		before := len(dst)
		dst = s.socks[j].take(dst, budget)
		budget -= len(dst) - before
	}
	return dst, nil
}

// Send transmits frames through the sockets that have a TX ring, starting
// with a different one each call and moving on when one is full. It
// returns how many frames were taken (see Socket.Send).
func (s *Source) Send(frames [][]byte) (int, error) {
	if s.closed {
		return 0, ErrClosed
	}
	if len(s.tx) == 0 {
		return 0, ErrNoTX
	}
	start := s.txNext
	if s.txNext++; s.txNext >= len(s.tx) {
		s.txNext = 0
	}
	sent := 0
	for i := 0; i < len(s.tx); i++ {
		j := start + i
		if j >= len(s.tx) {
			j -= len(s.tx)
		}
		n, err := s.tx[j].Send(frames[sent:])
		sent += n
		if err != nil {
			return sent, err
		}
		if sent == len(frames) {
			break
		}
	}
	return sent, nil
}

// Stats sums the sockets' counters.
func (s *Source) Stats() (Stats, error) {
	var total Stats
	var errs []error
	for _, sk := range s.socks {
		st, err := sk.Stats()
		if err != nil {
			errs = append(errs, err)
		}
		total = total.Add(st)
	}
	return total, errors.Join(errs...)
}

// Close closes every socket and its UMEM.
func (s *Source) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, sk := range s.socks {
		errs = append(errs, sk.Close())
	}
	return errors.Join(errs...)
}

// WaitFDs returns the sockets' descriptors: each becomes readable (POLLIN)
// when its RX ring has frames. The engine sleeps on them when idle
// (nic.Waitable).
func (s *Source) WaitFDs() []int {
	fds := make([]int, 0, len(s.socks))
	for _, sk := range s.socks {
		fds = append(fds, sk.FD())
	}
	return fds
}
