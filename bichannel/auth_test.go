package bichannel

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport/lossytest"
)

var testKey = []byte("bichannel test cluster key, 32 B")

func authConfig() Config {
	cfg := testConfig()
	cfg.ClusterKey = testKey
	return cfg
}

// The authenticated mode delivers exactly once, over a lossy, reordering,
// duplicating network and over kernel UDP with send drops, and every
// datagram carries a tag the receiver checks.
func TestAuthExactlyOnce(t *testing.T) {
	t.Run("lossy", func(t *testing.T) {
		eps, _ := lossyCluster(t, 3, authConfig(), lossytest.Config{Loss: 0.15, Reorder: 0.1, Duplicate: 0.05, Seed: 7})
		for _, e := range eps {
			for _, p := range e.peers() {
				if !p.auth || p.txKey == (sipKey{}) || p.rxKey == (sipKey{}) || p.txKey == p.rxKey {
					t.Fatalf("node %d -> %d: auth %v, keys %x %x", e.ID(), p.id, p.auth, p.txKey, p.rxKey)
				}
				// Each side's sending key is the other's receiving key.
				q := eps[p.id].peers()[e.ID()]
				if q.rxKey != p.txKey || q.txKey != p.rxKey {
					t.Fatalf("node %d and %d disagree on the keys", e.ID(), p.id)
				}
			}
		}
		runTraffic(t, eps, trafficOpts{perPair: 300})
	})
	t.Run("udp", func(t *testing.T) {
		eps, _ := udpCluster(t, 2, authConfig(), 0.05)
		runTraffic(t, eps, trafficOpts{perPair: 300})
	})
}

// connectPair builds two endpoints from ca and cb and connects them;
// it returns both Connect errors.
func connectPair(t *testing.T, ca, cb Config, timeout time.Duration) (*Endpoint, *Endpoint, error, error) {
	t.Helper()
	ln, err := lossytest.New(lossytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(c Config, id int) *Endpoint {
		c.NodeID = id
		fp, err := ln.NewFastPath(c.Workers)
		if err != nil {
			t.Fatal(err)
		}
		c.FastPath = fp
		e, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	a, b := mk(ca, 0), mk(cb, 1)
	peers := []Peer{{ID: 0, Addr: a.ControlAddr()}, {ID: 1, Addr: b.ControlAddr()}}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	errb := make(chan error, 1)
	go func() { errb <- b.Connect(ctx, peers) }()
	erra := a.Connect(ctx, peers)
	if erra != nil {
		time.Sleep(50 * time.Millisecond) // let the acceptor count its refusal
		cancel()
	}
	return a, b, erra, <-errb
}

// Nodes with different keys, or one with a key and one without, do not
// connect, and say why.
func TestAuthMismatch(t *testing.T) {
	other := authConfig()
	other.ClusterKey = []byte("another cluster key of 32 bytes!")
	for _, tc := range []struct {
		name   string
		a, b   Config
		errSub string
	}{
		{"different-keys", authConfig(), other, "did not prove it holds the cluster key"},
		{"dialer-without-key", testConfig(), authConfig(), "requires authentication"},
		{"acceptor-without-key", authConfig(), testConfig(), "has no cluster key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, erra, errb := connectPair(t, tc.a, tc.b, 3*time.Second)
			if erra == nil || errb == nil {
				t.Fatalf("connected: %v, %v", erra, errb)
			}
			if !strings.Contains(erra.Error(), tc.errSub) {
				t.Errorf("dialer's error %q does not say %q", erra, tc.errSub)
			}
			if a.Stats().RefusedAuth+b.Stats().RefusedAuth == 0 {
				t.Errorf("no refusal counted: %+v %+v", a.Stats(), b.Stats())
			}
			t.Logf("dialer: %v", erra)
		})
	}
	if _, err := New(Config{ClusterKey: []byte("short")}); err == nil || !strings.Contains(err.Error(), "at least") {
		t.Errorf("short key: %v", err)
	}
}

// A dialer whose peer calls Connect late is told to dial again, and
// connects once it does. A short handshake timeout makes the acceptor's
// wait for Connect short (Config.preConnectWait: 100ms).
func TestConnectLate(t *testing.T) {
	for _, mode := range []string{"unauthenticated", "authenticated"} {
		t.Run(mode, func(t *testing.T) {
			cfg := testConfig()
			if mode == "authenticated" {
				cfg = authConfig()
			}
			cfg.HandshakeTimeout = 200 * time.Millisecond
			ln, _ := lossytest.New(lossytest.Config{})
			var eps [2]*Endpoint
			for i := range eps {
				c := cfg
				c.NodeID = i
				c.FastPath, _ = ln.NewFastPath(c.Workers)
				e, err := New(c)
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				eps[i] = e
			}
			peers := []Peer{{ID: 0, Addr: eps[0].ControlAddr()}, {ID: 1, Addr: eps[1].ControlAddr()}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			erra := make(chan error, 1)
			go func() { erra <- eps[0].Connect(ctx, peers) }()
			time.Sleep(300 * time.Millisecond) // several waits of the acceptor
			if err := eps[1].Connect(ctx, peers); err != nil {
				t.Fatal(err)
			}
			if err := <-erra; err != nil {
				t.Fatal(err)
			}
			if err := eps[0].Send(1, 0, []byte("late")); err != nil {
				t.Fatal(err)
			}
			msgs, err := eps[1].RecvWait(ctx, 0, nil)
			if err != nil || len(msgs) != 1 || string(msgs[0].Data) != "late" {
				t.Fatalf("%v %v", msgs, err)
			}
			if s := eps[1].Stats(); s.RefusedAuth+s.RefusedPeer+s.RefusedProto+s.RefusedTaken != 0 {
				t.Errorf("refusals counted for a late Connect: %+v", s)
			}
		})
	}
}

// Many nodes on one address connecting at once go past MaxPendingPerIP:
// the extra dialers are told to dial again, and every node connects.
func TestPendingCapRetry(t *testing.T) {
	cfg := testConfig()
	cfg.Workers = 1
	cfg.Flows = 1
	cfg.MaxPendingPerIP = 1
	cfg.Fast = FastUDP
	for _, key := range [][]byte{nil, testKey} {
		c := cfg
		c.ClusterKey = key
		eps := newCluster(t, 6, c, nil) // kernel UDP, every node on 127.0.0.1
		limited := uint64(0)
		for _, e := range eps {
			limited += e.Stats().RefusedLimit
		}
		t.Logf("authenticated %v: %d connections told to dial again", key != nil, limited)
		if err := eps[0].Send(5, 0, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
}

// The datagram keys are HKDF-SHA256 (RFC 5869) of the cluster key, with
// the transcript as salt and the direction as info: computed here from
// its definition, with HMAC.
func TestDatagramKeysAreHKDF(t *testing.T) {
	key := []byte("a cluster key of 32 bytes, say!!")
	var nd, na [nonceLen]byte
	nd[0], na[0] = 1, 2
	tr := transcript(3, 4, &nd, &na)
	prk := hmacSum(tr, key) // extract: HMAC(salt, secret)
	for _, c := range []struct {
		label string
		want  func(dToA, aToD sipKey) sipKey
	}{
		{labelDToA, func(d, _ sipKey) sipKey { return d }},
		{labelAToD, func(_, a sipKey) sipKey { return a }},
	} {
		t1 := hmacSum(prk[:], []byte(c.label), []byte{1}) // expand: T(1)
		if got := c.want(datagramKeys(key, tr)); got != newSipKey(t1[:16]) {
			t.Errorf("%s: key is not HKDF-SHA256's", c.label)
		}
	}
}
