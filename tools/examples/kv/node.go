package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"net"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/vnic/vnic/bichannel"
)

// Sizes of the wire formats. A client request is 64 bytes: request id,
// key, value; the reply is 16: request id, version (0: failed). A
// replication message is a kind byte, a count and that many updates
// (version, key, value: 64 bytes each) of consecutive versions; an
// acknowledgement (kernel TCP only: the bi-channel acknowledges messages
// itself) is a kind byte and the shard's version up to which the secondary
// applied everything (versions double as sequence numbers); a fetch (a
// secondary asking for the updates of a message the primary abandoned) is
// a kind byte, the first version and the count.
const (
	ValueLen   = 48
	ReqLen     = 8 + 8 + ValueLen
	ReplyLen   = 16
	UpdLen     = 8 + 8 + ValueLen
	msgRepl    = 1
	msgAck     = 2
	msgFetch   = 3
	ackLen     = 1 + 8
	fetchLen   = 1 + 8 + 1
	maxPerRepl = 20 // 2 + 20*64 = 1282 bytes: one MTU
	// MaxSecondaries bounds the secondaries (a bit each in a mask).
	MaxSecondaries = 62
)

// replTag is the bi-channel tag of a replication message: its first
// version and its count, so that both ends know what an acknowledgement or
// a skip is about.
func replTag(first uint64, count int) uint64 { return first<<8 | uint64(count) }

func untag(tag uint64) (first uint64, count int) { return tag >> 8, int(tag & 0xff) }

// Update is one replicated update.
type Update struct {
	Version, Key uint64
	Value        [ValueLen]byte
}

// Entry is a key's state on a replica.
type Entry struct {
	Version uint64
	Value   [ValueLen]byte
}

// ShardOf maps a key to its shard.
func ShardOf(key uint64, shards int) int {
	x := key * 0x9e3779b97f4a7c15
	return int((x >> 32) * uint64(shards) >> 32)
}

// Replica is the state every node keeps per shard: the table and the log
// of applied updates (the test compares it with the acknowledged log).
type Replica struct {
	mu      sync.Mutex
	Table   *Table
	Log     UpdateLog // applied, in version order
	Applied uint64    // every version up to this is applied
	// OrderViolations counts updates that would have replaced a key's
	// newer version with an older one; always 0.
	OrderViolations uint64
	// Fetched counts the updates a secondary fetched from the primary
	// because the primary abandoned their message to it (a quorum had
	// it, and its copy here was lost).
	Fetched uint64
}

// UpdateLog is an append-only log of updates in chunks, so that it grows
// without copying what it holds (a slice doubling its array copied the
// whole log: a third of the process's CPU at 40 000 updates/s).
type UpdateLog struct {
	chunks [][]Update // each logChunk long
	n      int
}

const logChunk = 4096

// Append adds u; it allocates a chunk every logChunk updates unless
// Reserve did.
func (l *UpdateLog) Append(u *Update) {
	if l.n == len(l.chunks)*logChunk {
		l.chunks = append(l.chunks, make([]Update, logChunk))
	}
	l.chunks[l.n/logChunk][l.n%logChunk] = *u
	l.n++
}

// Reserve allocates room for n more updates and faults its pages in.
func (l *UpdateLog) Reserve(n int) {
	for len(l.chunks)*logChunk < l.n+n {
		c := make([]Update, logChunk)
		for i := 0; i < len(c); i += pageSlots {
			c[i].Version = 0
		}
		l.chunks = append(l.chunks, c)
	}
}

// Len is the number of updates.
func (l *UpdateLog) Len() int { return l.n }

// At returns update i.
func (l *UpdateLog) At(i int) *Update { return &l.chunks[i/logChunk][i%logChunk] }

// Slice returns a copy of the log.
func (l *UpdateLog) Slice() []Update {
	out := make([]Update, 0, l.n)
	for i := 0; i < l.n; i += logChunk {
		out = append(out, l.chunks[i/logChunk][:min(logChunk, l.n-i)]...)
	}
	return out
}

// Sizing is the load a node sizes its shards for up front, so that
// applying an update neither allocates nor faults a page in.
type Sizing struct {
	// Keys is the key space the load draws from (0: DefaultKeys a
	// shard); the shards' tables hold it without growing.
	Keys uint64
	// Updates is the updates the load offers in all (0: unknown); the
	// shards' logs reserve room for them, at most maxReserved a shard.
	Updates uint64
}

const (
	// DefaultKeys is the keys a shard's table holds without growing
	// when the key space is not given.
	DefaultKeys = 1 << 15
	// maxReserved bounds the updates a shard's log reserves (64 MiB).
	maxReserved = 1 << 20
)

// newReplica returns a shard of shards sized for sz: a table growing or a
// log faulting its pages in under load would do so in the middle of the
// latency measurement.
func newReplica(sz Sizing, shards int) *Replica {
	r := &Replica{Table: newTable(cmp.Or(perShard(sz.Keys, shards), DefaultKeys))}
	r.Log.Reserve(int(min(perShard(sz.Updates, shards), maxReserved)))
	return r
}

// perShard is one shard's part of n over shards shards, with room for
// ShardOf's unevenness (0: 0).
func perShard(n uint64, shards int) uint64 {
	if n == 0 {
		return 0
	}
	k := n / uint64(shards)
	return k + k/8 + 64
}

// apply applies u, the update after r.Applied; the caller holds r.mu.
// It allocates nothing but a chunk of the log every logChunk updates.
func (r *Replica) apply(u *Update) {
	s := r.Table.find(u.Key)
	if s.Version >= u.Version {
		r.OrderViolations++
		return
	}
	if s.Version == 0 {
		r.Table.put(u.Key, &Entry{Version: u.Version, Value: u.Value})
	} else {
		s.Version, s.Value = u.Version, u.Value
	}
	r.Log.Append(u)
	r.Applied = u.Version
}

// Snapshot returns a copy of the shard's table and log.
func (r *Replica) Snapshot() (map[uint64]Entry, []Update, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := make(map[uint64]Entry, r.Table.Len())
	r.Table.Range(func(k uint64, e *Entry) { t[k] = *e })
	return t, r.Log.Slice(), r.OrderViolations
}

// earlyWindow is the versions ahead of a shard's next one whose updates
// a secondary holds without allocating (1 MiB a shard): more than the
// primary has in flight with the case study's bi-channel (2 flows of 256
// buffers, 20 updates a message).
const earlyWindow = 1 << 14

// earlyBuf holds the updates that arrived ahead of a missing version
// until it comes: a ring indexed by version, and a map for versions
// beyond the ring's window (it allocates, the ring does not).
type earlyBuf struct {
	ring []Update // version v in ring[v%earlyWindow] while held
	far  map[uint64]Update
	n    int // updates held
}

func newEarlyBuf() *earlyBuf {
	e := &earlyBuf{ring: make([]Update, earlyWindow)}
	for i := 0; i < len(e.ring); i += pageSlots {
		e.ring[i].Version = 0 // fault the page in now, not under load
	}
	return e
}

// put holds u, applied being the shard's version applied up to.
func (e *earlyBuf) put(u *Update, applied uint64) {
	if u.Version-applied >= earlyWindow {
		if e.far == nil {
			e.far = map[uint64]Update{}
		}
		if _, ok := e.far[u.Version]; !ok {
			e.n++
		}
		e.far[u.Version] = *u
		return
	}
	s := &e.ring[u.Version%earlyWindow]
	if s.Version != u.Version {
		e.n++
	}
	*s = *u
}

// take removes version v and reports whether it was held; u is its
// update.
func (e *earlyBuf) take(v uint64, u *Update) bool {
	if e.n == 0 {
		return false
	}
	got := false
	if s := &e.ring[v%earlyWindow]; s.Version == v {
		*u = *s
		s.Version = 0
		e.n--
		got = true
	}
	if len(e.far) > 0 {
		if f, ok := e.far[v]; ok {
			delete(e.far, v)
			e.n--
			if !got {
				*u = f
				got = true
			}
		}
	}
	return got
}

// applyMsg applies replication message m's updates in version order: the
// next version at once, later ones once the versions before them came
// (early holds them), earlier ones not again. It reports whether m was
// a replication message.
func (r *Replica) applyMsg(m []byte, early *earlyBuf) bool {
	if len(m) < 2 || m[0] != msgRepl || len(m) != 2+int(m[1])*UpdLen {
		return false
	}
	var u, dup Update
	for i := range int(m[1]) {
		b := m[2+i*UpdLen : 2+(i+1)*UpdLen]
		u.Version, u.Key = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		copy(u.Value[:], b[16:16+ValueLen])
		switch {
		case u.Version <= r.Applied:
		case u.Version == r.Applied+1:
			early.take(u.Version, &dup) // a copy may wait there too
			r.apply(&u)
		default:
			early.put(&u, r.Applied)
		}
	}
	for early.take(r.Applied+1, &u) {
		r.apply(&u)
	}
	return true
}

// Secondary applies the primary's updates of each shard in version order
// and acknowledges, on the replication network, the version up to which
// it applied everything (kernel TCP; over the bi-channel the network's own
// acknowledgements do). When the primary abandons a message to it (a
// quorum had it and this copy was lost), it fetches the message's updates
// from the primary: the versions say which.
type Secondary struct {
	ID, Shards int
	Repl       Repl
	Shard      []*Replica
	wg         sync.WaitGroup
}

// StartSecondary runs a secondary's shard workers, sized for sz, until
// ctx ends.
func StartSecondary(ctx context.Context, id, shards int, sz Sizing, repl Repl) *Secondary {
	s := &Secondary{ID: id, Shards: shards, Repl: repl, Shard: make([]*Replica, shards)}
	for sh := range shards {
		r := newReplica(sz, shards)
		s.Shard[sh] = r
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			early := newEarlyBuf()
			var ack [ackLen]byte
			ack[0] = msgAck
			_, tracked := repl.(TrackedRepl)
			fetches := startSendQueue(ctx, &s.wg)
			onEvent := func(peer int, kind bichannel.MsgKind, tag uint64) {
				if kind != bichannel.MsgSkipped {
					return
				}
				first, n := untag(tag)
				r.mu.Lock()
				r.Fetched += uint64(n)
				r.mu.Unlock()
				fetches.push(func() {
					var fetch [fetchLen]byte
					fetch[0] = msgFetch
					binary.LittleEndian.PutUint64(fetch[1:], first)
					fetch[9] = byte(n)
					repl.Send(peer, sh, fetch[:])
				})
			}
			repl.Receive(ctx, sh, func(peer int, m []byte) {
				r.mu.Lock()
				if !r.applyMsg(m, early) {
					r.mu.Unlock()
					return
				}
				if tracked {
					r.mu.Unlock()
					return
				}
				binary.LittleEndian.PutUint64(ack[1:], r.Applied)
				r.mu.Unlock()
				repl.Send(peer, sh, ack[:])
				repl.Flush(sh)
			}, onEvent)
		}()
	}
	return s
}

// Wait waits for the shard workers to end.
func (s *Secondary) Wait() { s.wg.Wait() }

// sendQueue runs sends on a goroutine of its own, in order, so that a
// receiving goroutine never waits for the network's credits: a receiver
// blocked in Send stops consuming, and its peer's credits stop coming back.
type sendQueue struct {
	mu    sync.Mutex
	items []func()
	kick  chan struct{}
}

func startSendQueue(ctx context.Context, wg *sync.WaitGroup) *sendQueue {
	q := &sendQueue{kick: make(chan struct{}, 1)}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-q.kick:
			case <-ctx.Done():
				return
			}
			q.mu.Lock()
			items := q.items
			q.items = nil
			q.mu.Unlock()
			for _, f := range items {
				f()
			}
		}
	}()
	return q
}

func (q *sendQueue) push(f func()) {
	q.mu.Lock()
	q.items = append(q.items, f)
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// Primary serves clients over TCP and replicates every update to the
// secondaries; it applies an update and answers the client once a
// majority of all replicas (itself included) has it.
type Primary struct {
	Shards, Secondaries int
	Repl                Repl
	Shard               []*pshard
	need                int // secondary acknowledgements an update needs
	tracked             TrackedRepl
	wg                  sync.WaitGroup
	Served              atomic.Uint64
}

type request struct {
	id, key uint64
	value   [ValueLen]byte
	c       *clientConn
}

type pending struct {
	Update
	id uint64
	c  *clientConn
}

type pshard struct {
	*Replica
	reqs  chan request
	next  uint64    // next version
	queue []pending // replicated, not yet committed, in version order
	sent  []sentMsg // TrackedRepl: messages waiting for their quorum, in version order
	acked []uint64  // per node: the version it acknowledged up to
	dead  []bool    // per node
	peers []int     // the secondaries' ids

	// The arrays queue and sent lie in (pushBack), and the tickets of
	// committed messages, for the next ones.
	queueBase []pending
	sentBase  []sentMsg
	spare     [][]bichannel.Ticket
}

// sentMsg is a replication message sent over a TrackedRepl: its
// versions, who acknowledged it and its tickets (to abandon it).
type sentMsg struct {
	first, last uint64
	acked       uint64 // bit i: secondary i acknowledged it
	known       uint64 // bit i: tickets[i] is set
	quorum      bool
	tickets     []bichannel.Ticket
}

// findSent returns the index of the message whose first version is first,
// or -1.
func (ps *pshard) findSent(first uint64) int {
	i := sort.Search(len(ps.sent), func(i int) bool { return ps.sent[i].first >= first })
	if i < len(ps.sent) && ps.sent[i].first == first {
		return i
	}
	return -1
}

// StartPrimary runs the primary's shard workers (node 0; secondaries are
// nodes 1..secondaries) until ctx ends. Serve hands it client connections.
// Its shards are sized for sz.
func StartPrimary(ctx context.Context, shards, secondaries int, sz Sizing, repl Repl) *Primary {
	p := &Primary{Shards: shards, Secondaries: secondaries, Repl: repl, Shard: make([]*pshard, shards)}
	p.need = (secondaries+1)/2 + 1 - 1 // a majority of 1+secondaries replicas, the primary being one
	p.tracked, _ = repl.(TrackedRepl)
	for sh := range shards {
		ps := &pshard{Replica: newReplica(sz, shards), reqs: make(chan request, 4096), next: 1,
			acked: make([]uint64, secondaries+1), dead: make([]bool, secondaries+1)}
		for i := 1; i <= secondaries; i++ {
			ps.peers = append(ps.peers, i)
		}
		p.Shard[sh] = ps
		fetches := startSendQueue(ctx, &p.wg)
		p.wg.Add(2)
		go func() { defer p.wg.Done(); p.replicate(ctx, sh, ps) }()
		go func() {
			defer p.wg.Done()
			repl.Receive(ctx, sh, func(peer int, m []byte) {
				if peer < 1 || peer > secondaries {
					return
				}
				if len(m) == fetchLen && m[0] == msgFetch {
					first, n := binary.LittleEndian.Uint64(m[1:]), int(m[9])
					fetches.push(func() { p.serveFetch(sh, ps, peer, first, n) })
					return
				}
				if len(m) != ackLen || m[0] != msgAck {
					return
				}
				v := binary.LittleEndian.Uint64(m[1:])
				ps.mu.Lock()
				if v > ps.acked[peer] && v < ps.next {
					ps.acked[peer] = v
					p.commit(ps)
				}
				ps.mu.Unlock()
			}, func(peer int, kind bichannel.MsgKind, tag uint64) {
				if kind == bichannel.MsgAcked && peer >= 1 && peer <= secondaries {
					p.onAcked(sh, ps, peer, tag)
				}
			})
		}()
	}
	return p
}

// commit applies and answers every queued update a quorum acknowledged
// (cumulative acknowledgements, kernel TCP); the caller holds ps.mu.
func (p *Primary) commit(ps *pshard) {
	n := 0
	for ; n < len(ps.queue); n++ {
		v := ps.queue[n].Version
		got := 0
		for _, id := range ps.peers {
			if ps.acked[id] >= v {
				got++
			}
		}
		if got < p.need {
			break
		}
	}
	p.answer(ps, n)
}

// onAcked counts secondary peer's acknowledgement of the message tagged
// tag (TrackedRepl). The acknowledgement that completes the message's
// quorum abandons its copies to the secondaries that have not
// acknowledged it: they are not retransmitted (a lost one is skipped, and
// its secondary fetches the updates). Every message at the head of the
// queue with its quorum is committed.
func (p *Primary) onAcked(sh int, ps *pshard, peer int, tag uint64) {
	first, _ := untag(tag)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	i := ps.findSent(first)
	if i < 0 {
		return // committed already: a late acknowledgement
	}
	m := &ps.sent[i]
	bit := uint64(1) << peer
	if m.acked&bit != 0 {
		return
	}
	m.acked |= bit
	if !m.quorum && bits.OnesCount64(m.acked) >= p.need {
		m.quorum = true
		for _, id := range ps.peers {
			if b := uint64(1) << id; m.known&b != 0 && m.acked&b == 0 {
				p.tracked.Abandon(id, sh, m.tickets[id])
			}
		}
	}
	n := 0
	for n < len(ps.sent) && ps.sent[n].quorum {
		n++
	}
	if n == 0 {
		return
	}
	last := ps.sent[n-1].last
	for i := range n {
		ps.spare = append(ps.spare, ps.sent[i].tickets)
	}
	ps.sent = dropFront(ps.sent, n)
	q := 0
	for q < len(ps.queue) && ps.queue[q].Version <= last {
		q++
	}
	p.answer(ps, q)
}

// serveFetch sends secondary peer the n updates from version first on
// (their message was abandoned to it).
func (p *Primary) serveFetch(sh int, ps *pshard, peer int, first uint64, n int) {
	msg := make([]byte, 2, 2+n*UpdLen)
	msg[0] = msgRepl
	ps.mu.Lock()
	for v := first; v < first+uint64(n); v++ {
		var u *Update
		if v >= 1 && v <= uint64(ps.Log.Len()) && ps.Log.At(int(v-1)).Version == v {
			u = ps.Log.At(int(v - 1))
		} else {
			for j := range ps.queue {
				if ps.queue[j].Version == v {
					u = &ps.queue[j].Update
					break
				}
			}
		}
		if u == nil {
			continue // never replicated: nothing to fetch
		}
		b := msg[len(msg) : len(msg)+UpdLen]
		binary.LittleEndian.PutUint64(b, u.Version)
		binary.LittleEndian.PutUint64(b[8:], u.Key)
		copy(b[16:], u.Value[:])
		msg = msg[:len(msg)+UpdLen]
	}
	ps.mu.Unlock()
	msg[1] = byte((len(msg) - 2) / UpdLen)
	p.Repl.Send(peer, sh, msg)
}

// answer applies and answers the first n queued updates; the caller holds
// ps.mu.
func (p *Primary) answer(ps *pshard, n int) {
	for i := range n {
		q := &ps.queue[i]
		ps.apply(&q.Update)
		q.c.reply(q.id, q.Version)
		q.c = nil
	}
	if n > 0 {
		p.Served.Add(uint64(n))
		ps.queue = dropFront(ps.queue, n)
	}
}

// dropFront removes s's first n elements without moving the rest: a
// queue that moved its tail forward on every commit cost time in its
// length per acknowledgement, so that an overloaded primary (a long
// queue) slowed down the more it fell behind. append reuses the
// capacity behind the tail and, when it runs out, copies only the live
// elements: amortised constant time per element.
func dropFront[T any](s []T, n int) []T {
	clear(s[:n]) // let the garbage collector have what they point to
	return s[n:]
}

// pushBack appends v to s, a suffix (what dropFront left) of the array
// base starts. When s's capacity runs out, it moves s's elements to the
// front of base if they fill less than half of it, else appends into a
// new array (base then): a queue of steady length allocates nothing, and
// each element moves amortised a constant number of times.
func pushBack[T any](base *[]T, s []T, v T) []T {
	if len(s) < cap(s) {
		return append(s, v)
	}
	if b := (*base)[:cap(*base)]; 2*len(s) < len(b) {
		n := copy(b, s)
		clear(b[n:])
		return append(b[:n], v)
	}
	s = append(s, v)
	*base = s[:0]
	return s
}

// replicate is shard sh's core worker: it takes the requests the client
// connections routed to it, gives each the shard's next version and sends
// them, batched, to shard sh of every live secondary.
func (p *Primary) replicate(ctx context.Context, sh int, ps *pshard) {
	msg := make([]byte, 2, 2+maxPerRepl*UpdLen)
	msg[0] = msgRepl
	for {
		var r request
		select {
		case r = <-ps.reqs:
		case <-ctx.Done():
			return
		}
		msg = msg[:2]
		ps.mu.Lock()
		first := ps.next
		for {
			u := Update{Version: ps.next, Key: r.key, Value: r.value}
			ps.next++
			ps.queue = pushBack(&ps.queueBase, ps.queue, pending{Update: u, id: r.id, c: r.c})
			b := msg[len(msg) : len(msg)+UpdLen]
			binary.LittleEndian.PutUint64(b, u.Version)
			binary.LittleEndian.PutUint64(b[8:], u.Key)
			copy(b[16:], u.Value[:])
			msg = msg[:len(msg)+UpdLen]
			if len(msg)+UpdLen > cap(msg) {
				break
			}
			select {
			case r = <-ps.reqs:
				continue
			default:
			}
			break
		}
		msg[1] = byte((len(msg) - 2) / UpdLen)
		tag := replTag(first, int(msg[1]))
		if p.tracked != nil {
			var tickets []bichannel.Ticket
			if k := len(ps.spare); k > 0 {
				tickets, ps.spare = ps.spare[k-1], ps.spare[:k-1] // read only where known says
			} else {
				tickets = make([]bichannel.Ticket, p.Secondaries+1)
			}
			ps.sent = pushBack(&ps.sentBase, ps.sent, sentMsg{first: first, last: ps.next - 1, tickets: tickets})
		}
		dead := ps.dead
		ps.mu.Unlock()
		for _, id := range ps.peers {
			if dead[id] {
				continue
			}
			var err error
			if p.tracked != nil {
				var t bichannel.Ticket
				if t, err = p.tracked.SendTracked(id, sh, msg, tag); err == nil {
					ps.mu.Lock()
					if i := ps.findSent(first); i >= 0 {
						m := &ps.sent[i]
						m.tickets[id] = t
						m.known |= 1 << id
						if m.quorum && m.acked&(1<<id) == 0 {
							p.tracked.Abandon(id, sh, t) // the quorum came first
						}
					}
					ps.mu.Unlock()
				}
			} else {
				err = p.Repl.Send(id, sh, msg)
			}
			if err != nil {
				if errors.Is(err, errPeerGone) {
					ps.mu.Lock()
					ps.dead[id] = true
					ps.mu.Unlock()
					continue
				}
				return
			}
		}
		p.Repl.Flush(sh)
	}
}

// Serve answers one client connection: it reads requests, routes each to
// its key's shard (so updates of one key keep their order) and writes the
// replies as they come, flushing when none is waiting.
func (p *Primary) Serve(ctx context.Context, conn net.Conn) {
	c := &clientConn{replies: make(chan [ReplyLen]byte, 8192)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		bw := bufio.NewWriterSize(conn, 16<<10)
		for {
			var r [ReplyLen]byte
			select {
			case r = <-c.replies:
			case <-ctx.Done():
				return
			}
			bw.Write(r[:])
			for more := true; more; {
				select {
				case r = <-c.replies:
					bw.Write(r[:])
				default:
					more = false
				}
			}
			if bw.Flush() != nil {
				return
			}
		}
	}()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	br := bufio.NewReaderSize(conn, 16<<10)
	var b [ReqLen]byte
	for {
		if _, err := io.ReadFull(br, b[:]); err != nil {
			break
		}
		r := request{id: binary.LittleEndian.Uint64(b[:]), key: binary.LittleEndian.Uint64(b[8:]), c: c}
		copy(r.value[:], b[16:])
		select {
		case p.Shard[ShardOf(r.key, p.Shards)].reqs <- r:
		case <-ctx.Done():
			return
		}
	}
	<-done
	conn.Close()
}

type clientConn struct{ replies chan [ReplyLen]byte }

func (c *clientConn) reply(id, version uint64) {
	var r [ReplyLen]byte
	binary.LittleEndian.PutUint64(r[:], id)
	binary.LittleEndian.PutUint64(r[8:], version)
	c.replies <- r
}

// Wait waits for the shard workers to end.
func (p *Primary) Wait() { p.wg.Wait() }
