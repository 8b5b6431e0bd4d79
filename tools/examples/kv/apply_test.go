package main

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// replMsg encodes us as a replication message.
func replMsg(us []Update) []byte {
	m := make([]byte, 2, 2+len(us)*UpdLen)
	m[0], m[1] = msgRepl, byte(len(us))
	for _, u := range us {
		b := make([]byte, UpdLen)
		binary.LittleEndian.PutUint64(b, u.Version)
		binary.LittleEndian.PutUint64(b[8:], u.Key)
		copy(b[16:], u.Value[:])
		m = append(m, b...)
	}
	return m
}

// updates returns n updates of keys drawn from [0, keys), versions from 1.
func updates(n int, keys uint64, seed uint64) []Update {
	rng := rand.New(rand.NewPCG(seed, 0))
	us := make([]Update, n)
	for i := range us {
		us[i] = Update{Version: uint64(i + 1), Key: rng.Uint64N(keys)}
		binary.LittleEndian.PutUint64(us[i].Value[:], rng.Uint64())
	}
	return us
}

// replMsgs splits us into messages of maxPerRepl updates.
func replMsgs(us []Update) [][]byte {
	var ms [][]byte
	for i := 0; i < len(us); i += maxPerRepl {
		ms = append(ms, replMsg(us[i:min(i+maxPerRepl, len(us))]))
	}
	return ms
}

// Applying an update allocates nothing in a shard sized for the load, on
// a secondary (replication messages in and out of order, through the
// early buffer) and on the primary (committing the head of its queue); a
// log beyond its reservation takes a chunk every logChunk updates.
func TestApplyAllocatesNothing(t *testing.T) {
	const keys = 1000
	us := updates(40*maxPerRepl*8, keys, 1)
	ms := replMsgs(us)
	for i := 0; i+1 < len(ms); i += 4 {
		ms[i], ms[i+1] = ms[i+1], ms[i] // one message in four comes early
	}
	sz := Sizing{Keys: keys, Updates: uint64(len(us))}
	r := newReplica(sz, 1)
	early := newEarlyBuf()
	i := 0
	if a := testing.AllocsPerRun(len(ms)-1, func() {
		r.applyMsg(ms[i], early)
		i++
	}); a != 0 {
		t.Errorf("secondary: %v allocations a replication message", a)
	}
	if r.Applied != uint64(len(us)) || early.n != 0 || r.OrderViolations != 0 {
		t.Fatalf("secondary applied up to %d of %d, %d held early, %d order violations", r.Applied, len(us), early.n, r.OrderViolations)
	}

	ps := &pshard{Replica: newReplica(sz, 1)}
	cc := &clientConn{replies: make(chan [ReplyLen]byte, 1)}
	for _, u := range us {
		ps.queue = append(ps.queue, pending{Update: u, c: cc})
	}
	p := &Primary{}
	if a := testing.AllocsPerRun(len(us)-1, func() {
		p.answer(ps, 1)
		<-cc.replies
	}); a != 0 {
		t.Errorf("primary: %v allocations an update", a)
	}
	if ps.Applied != uint64(len(us)) {
		t.Fatalf("primary applied up to %d of %d", ps.Applied, len(us))
	}

	l := UpdateLog{chunks: make([][]Update, 0, 8)} // the chunks' index does not grow here
	if a := testing.AllocsPerRun(4, func() {
		for range logChunk {
			l.Append(&us[0])
		}
	}); a != 1 {
		t.Errorf("the log allocated %v times in %d updates", a, logChunk)
	}
}

// The table holds what a map holds, across growth from its smallest size.
func TestTableAsMap(t *testing.T) {
	tb := newTable(0)
	want := map[uint64]Entry{}
	rng := rand.New(rand.NewPCG(2, 0))
	for v := uint64(1); v <= 20000; v++ {
		k := rng.Uint64N(8000) * 0x9e3779b97f4a7c15 // spread, and key 0 too
		if e := tb.Get(k); (e != nil) != (want[k].Version != 0) || e != nil && *e != want[k] {
			t.Fatalf("key %d: table has %v, a map %v", k, e, want[k])
		}
		e := Entry{Version: v}
		e.Value[0] = byte(v)
		tb.put(k, &e)
		want[k] = e
	}
	if tb.Len() != len(want) || len(tb.slots) <= minTableSlots {
		t.Fatalf("%d keys in %d slots, want %d keys", tb.Len(), len(tb.slots), len(want))
	}
	n := 0
	tb.Range(func(k uint64, e *Entry) {
		n++
		if *e != want[k] {
			t.Fatalf("key %d: %v, want %v", k, *e, want[k])
		}
	})
	if n != len(want) {
		t.Fatalf("Range gave %d keys of %d", n, len(want))
	}
}

// A secondary applies updates in version order whatever order their
// messages come in, duplicated, and however far ahead of the next version
// (beyond the early buffer's window too), and ends with what in-order
// application gives.
func TestApplyMsgAnyOrder(t *testing.T) {
	const keys = 300
	us := updates(earlyWindow*3, keys, 3)
	ms := replMsgs(us)
	rng := rand.New(rand.NewPCG(4, 0))
	// Every message but the first, some twice, in any order: they all
	// wait for the first, which comes last; then late duplicates.
	var order []int
	for j := 1; j < len(ms); j++ {
		order = append(order, j)
		if rng.IntN(10) == 0 {
			order = append(order, j)
		}
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	r := newReplica(Sizing{Keys: keys}, 1)
	early := newEarlyBuf()
	for _, j := range order {
		if !r.applyMsg(ms[j], early) {
			t.Fatal("a replication message was refused")
		}
	}
	if r.Applied != 0 || early.n != len(us)-maxPerRepl || len(early.far) == 0 {
		t.Fatalf("before the first message: applied up to %d, %d held early (%d beyond the window)", r.Applied, early.n, len(early.far))
	}
	for _, j := range []int{0, 0, 5, len(ms) - 1} {
		r.applyMsg(ms[j], early)
	}
	if r.Applied != uint64(len(us)) || early.n != 0 || len(early.far) != 0 || r.OrderViolations != 0 {
		t.Fatalf("applied up to %d of %d, %d held early (%d far), %d order violations", r.Applied, len(us), early.n, len(early.far), r.OrderViolations)
	}
	want := map[uint64]Entry{}
	for _, u := range us {
		want[u.Key] = Entry{Version: u.Version, Value: u.Value}
	}
	table, log, _ := r.Snapshot()
	if len(table) != len(want) || len(log) != len(us) {
		t.Fatalf("%d keys, %d logged; want %d, %d", len(table), len(log), len(want), len(us))
	}
	for k, e := range want {
		if table[k] != e {
			t.Fatalf("key %d: %v, want %v", k, table[k], e)
		}
	}
	for i, u := range log {
		if u != us[i] {
			t.Fatalf("log entry %d: %v, want %v", i, u, us[i])
		}
	}
	if r.applyMsg([]byte{msgRepl, 2, 0}, early) {
		t.Fatal("a truncated message was applied")
	}
}

// BenchmarkApply is a shard applying in-order updates of the default
// load's key space (100 000 keys over 2 shards), its log grown as the
// updates come or reserved up front.
func BenchmarkApply(b *testing.B) {
	const keys = 100000
	us := updates(1<<16, keys, 5)
	for _, reserve := range []bool{false, true} {
		name := "log=grown"
		if reserve {
			name = "log=reserved"
		}
		b.Run(name, func(b *testing.B) {
			sz := Sizing{Keys: keys}
			if reserve {
				sz.Updates = uint64(2 * b.N)
			}
			r := newReplica(sz, 2)
			b.ResetTimer()
			for i := range b.N {
				u := us[i%len(us)]
				u.Version = uint64(i + 1)
				r.apply(&u)
			}
		})
	}
}
