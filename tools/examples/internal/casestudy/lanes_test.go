package casestudy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel"
)

// Writers puts a buffered writer on every outgoing connection of a mesh;
// ReadLane reads one lane's incoming connections, one fn call at a time
// under the lane's lock, and reports how each connection's reading ended:
// nil for the end of ctx between frames, an error for a frame cut short.
// A second ReadLane on the same connections reads again (the deadline the
// first one's ctx left is cleared).
func TestReadLane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const lanes, lane, per = 2, 1, 50
	ms, err := Meshes(ctx, Loopback(3), lanes, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	ws := [][][]*Writer{nil, ms[1].Writers(4096), ms[2].Writers(4096)}
	for i := 1; i <= 2; i++ {
		if len(ws[i]) != 3 || len(ws[i][0]) != lanes || ws[i][i][0] != nil || ws[i][0][lane] == nil || ws[i][0][lane].Dead {
			t.Fatalf("node %d: writers %v", i, ws[i])
		}
	}
	send := func(round int) {
		for i := 1; i <= 2; i++ {
			w := ws[i][0][lane]
			for k := range per {
				if err := WriteFrame(w.W, fmt.Appendf(nil, "%d:%d:%d", round, i, k)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.W.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	read := func(round int) map[int]error {
		rctx, rcancel := context.WithCancel(ctx)
		defer rcancel()
		var mu sync.Mutex
		got := map[int][]string{}
		n := 0
		ends := map[int]error{}
		var emu sync.Mutex
		ms[0].ReadLane(rctx, lane, 1024, &mu, func(p int, m []byte) bool {
			if mu.TryLock() {
				mu.Unlock()
				t.Error("fn called without the lane's lock")
			}
			got[p] = append(got[p], string(m))
			if n++; n == 2*per {
				rcancel()
			}
			return true
		}, func(p int, err error) {
			emu.Lock()
			ends[p] = err
			emu.Unlock()
		})
		for i := 1; i <= 2; i++ {
			var want []string
			for k := range per {
				want = append(want, fmt.Sprintf("%d:%d:%d", round, i, k))
			}
			if !slices.Equal(got[i], want) {
				t.Errorf("round %d from node %d: %q, want %q", round, i, got[i], want)
			}
		}
		return ends
	}
	for round := range 2 {
		send(round)
		if ends := read(round); len(ends) != 2 || ends[1] != nil || ends[2] != nil {
			t.Errorf("round %d: readings ended with %v, want nil for nodes 1 and 2", round, ends)
		}
	}

	// Node 2 cuts a frame short and closes: its reading fails, node 1's
	// ends with ctx, which ends once node 2's reading has (a reading that
	// never notices the cut runs into the 10 s deadline and the check
	// below fails).
	w := ws[2][0][lane]
	w.Conn.Write([]byte{0, 9, 1})
	w.Conn.Close()
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	ends := map[int]error{}
	var mu, emu sync.Mutex
	ms[0].ReadLane(rctx, lane, 1024, &mu, func(int, []byte) bool { return true }, func(p int, err error) {
		emu.Lock()
		ends[p] = err
		emu.Unlock()
		if p == 2 {
			rcancel()
		}
	})
	if ends[1] != nil || !errors.Is(ends[2], io.ErrUnexpectedEOF) {
		t.Errorf("a cut frame from node 2: %v, want nil for node 1 and %v for node 2", ends, io.ErrUnexpectedEOF)
	}
}

// RecvLane hands fn every message until fn says stop, passes RecvWait's
// errors through, and goes on past the one it ignores.
func TestRecvLane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	eps, err := Endpoints(ctx, EndpointsConfig{Places: Loopback(2), Workers: 1, Fast: bichannel.FastUDP,
		Template: bichannel.Config{Flows: 2, BuffersPerFlow: 32, RetransmitTimeout: 10 * time.Millisecond,
			HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer eps[1].Close()
	defer eps[0].Close()
	want := []string{"a", "bc", "def"}
	for _, m := range want {
		if err := eps[0].Send(1, 0, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err = RecvLane(ctx, eps[1], 0, func(m *bichannel.Message) bool {
		if m.Peer != 0 {
			t.Errorf("message from %d, want 0", m.Peer)
		}
		if m.Kind == bichannel.MsgData {
			got = append(got, string(m.Data))
		}
		return len(got) < len(want)
	})
	slices.Sort(got)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("RecvLane: %q, %v; want %q, nil", got, err, want)
	}

	// The end of ctx comes back.
	cctx, ccancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer ccancel()
	if err := RecvLane(cctx, eps[1], 0, func(*bichannel.Message) bool { return true }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ctx ended: %v, want %v", err, context.DeadlineExceeded)
	}

	// A peer gone: ErrPeerDown comes back (this endpoint does not
	// tolerate dead peers). Close's goodbye reports it: the heartbeat
	// timeout (10 s, so that a stall under -race does not mark the live
	// peer dead above) is past the 5 s this waits.
	eps[0].Close()
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	if err := RecvLane(dctx, eps[1], 0, func(*bichannel.Message) bool { return true }); !errors.Is(err, bichannel.ErrPeerDown) {
		t.Errorf("peer closed: %v, want %v", err, bichannel.ErrPeerDown)
	}
}
