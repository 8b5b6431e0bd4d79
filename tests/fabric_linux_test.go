//go:build linux

package tests

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/rss"
)

// TestFabricHostsExchange runs vnicd --source fabric as a process (no
// interface, no privilege) with two hosts attached, 198.18.0.1 and
// 198.18.0.2, exchanging UDP frames both ways through a lossy fabric, and
// checks the ledger: every frame sent is delivered or dropped by reason,
// each host receives exactly what the ledger says it delivered, each
// frame lands on the queue the host's key and RETA predict, and the same
// seed loses the same number of frames on a second run.
func TestFabricHostsExchange(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	first := fabricRun(t, "5")
	second := fabricRun(t, "5")
	if first != second {
		t.Fatalf("seed 5 lost %d frames, then %d", first, second)
	}
	// With a one-way delay (the loss comes first: the same draws).
	if delayed := fabricRun(t, "5", "--fabric-delay", "200us"); delayed != first {
		t.Fatalf("seed 5 lost %d frames with a delay, %d without", delayed, first)
	}
}

// fabricRun is one run of TestFabricHostsExchange; it returns the frames lost.
func fabricRun(t *testing.T, seed string, extra ...string) uint64 {
	socket := filepath.Join(t.TempDir(), "vnicd.sock")
	v, err := testutil.StartVnicd(testutil.VnicdOptions{Bin: vnicdBin, Log: newLogPath(t, "vnicd"), Socket: socket,
		Args: append([]string{"run", "--source", "fabric", "--socket", socket, "--metrics-addr", "",
			"--emulator-cpu", "-1", "--log-format", "json", "--fabric-loss", "0.05", "--fabric-seed", seed}, extra...)})
	if err != nil {
		t.Fatalf("vnicd --source fabric: %v", err)
	}
	defer v.Stop()
	ctx := context.Background()
	attach := func(name, addr string, queues int) *client.Tenant {
		ten, err := client.Attach(ctx, socket, client.AttachOptions{Name: name, Queues: queues, Match: client.Match{Proto: "udp"}, Host: &client.Host{Addr: addr}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ten.Close() })
		return ten
	}
	a, b := attach("a", "198.18.0.1", 2), attach("b", "198.18.0.2", 2)
	check := func(ten *client.Tenant) func(q int, p client.Packet) error {
		h, err := rss.NewHasher(ten.RSS.Key)
		if err != nil {
			t.Fatal(err)
		}
		return func(q int, p client.Packet) error {
			var tu rss.Tuple
			if err := rss.Parse(p.Data, &tu); err != nil {
				return err
			}
			if want := int(ten.RSS.RETA[h.HashTuple(&tu)%uint32(len(ten.RSS.RETA))]); want != q {
				return fmt.Errorf("flow %+v landed on queue %d, its key and RETA say %d", tu, q, want)
			}
			return nil
		}
	}
	ra, rb := receive(a, check(a)), receive(b, check(b))
	defer ra.close() // before the tenant is closed: a Queue must be idle then
	defer rb.close() // before the tenant is closed: a Queue must be idle then
	// Each host sends from its own MAC, the one vnicd derives from its
	// address (02:00 and the address's four bytes).
	mac := func(a netip.Addr) [6]byte {
		b := a.As4()
		return [6]byte{2, 0, b[0], b[1], b[2], b[3]}
	}
	build := func(src, dst string, n int) [][]byte {
		s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
		var out [][]byte
		for i := range n {
			out = append(out, rss.BuildUDP4(nil, mac(s), mac(d), s, d, uint16(1000+i), 9000, 18))
		}
		return out
	}
	send := func(r *receiver, frames [][]byte) {
		for sent := 0; sent < len(frames); {
			var n int
			var err error
			r.use(0, func(q *client.Queue) { n, err = q.Send(frames[sent:min(sent+32, len(frames))]) })
			if err != nil {
				t.Fatal(err)
			}
			if sent += n; n == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
	send(ra, build("198.18.0.1", "198.18.0.2", 2000))
	send(rb, build("198.18.0.2", "198.18.0.1", 1000))
	send(ra, build("198.18.0.1", "198.18.0.3", 100)) // no such host
	ledger := func(st proto.Stats, name string) map[string]uint64 {
		for _, ts := range st.Tenants {
			if ts.Name == name {
				return ts.Ledger
			}
		}
		t.Fatalf("no tenant %s in vnicd's stats", name)
		return nil
	}
	var la, lb map[string]uint64
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var st proto.Stats
		c, err := proto.Dial(socket)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Call(proto.TStats, nil, &st)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		la, lb = ledger(st, "a"), ledger(st, "b")
		if la["sent"] == 2100 && lb["sent"] == 1000 && uint64(rb.got.Load()) == la["delivered"] && uint64(ra.got.Load()) == lb["delivered"] {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("ledger a %v, b %v; a received %d, b %d", la, lb, ra.got.Load(), rb.got.Load())
		}
	}
	if err := ra.close(); err != nil {
		t.Fatal(err)
	}
	if err := rb.close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []map[string]uint64{la, lb} {
		if l["sent"] != l["delivered"]+l["no_host"]+l["loss"] {
			t.Fatalf("ledger does not balance: %v", l)
		}
	}
	if la["no_host"] != 100 || lb["no_host"] != 0 || la["received"] != lb["delivered"] || lb["received"] != la["delivered"] {
		t.Fatalf("ledger a %v, b %v", la, lb)
	}
	lost := la["loss"] + lb["loss"]
	if lost < 3000*3/100 || lost > 3000*7/100 {
		t.Fatalf("%d of 3000 frames lost at p=0.05", lost)
	}
	return lost
}
