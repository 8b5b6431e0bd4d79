package bichannel

import (
	"math/rand/v2"
	"testing"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
	"github.com/vnic/vnic/rss"
)

// shuffledRSS is a receiver whose table maps entries to queues in a
// scrambled order, with workers on a permutation of the queues, so
// targeting cannot succeed by accident.
func shuffledRSS(t *testing.T, profile string, queues int, seed uint64) (rss.Config, []int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	var key rss.Key
	if profile != rss.ProfileENAFixed {
		key = make(rss.Key, rss.KeyLen)
		for i := range key {
			key[i] = byte(r.Uint32())
		}
	}
	p, err := rss.ParseProfile(profile, key)
	if err != nil {
		t.Fatal(err)
	}
	reta, err := rss.NewRETA(rss.DefaultRETASize, queues)
	if err != nil {
		t.Fatal(err)
	}
	for i := range reta.Size() {
		reta.Set(i, r.IntN(queues))
	}
	for q := range queues { // every queue keeps at least one entry
		reta.Set(q*7%reta.Size(), q)
	}
	return rss.Config{Profile: p, RETA: reta}, r.Perm(queues)
}

// Every flow Connect chooses for worker w hashes, with the peer's RSS
// configuration, to the peer's worker w queue, with the peer's worker w
// port as destination; and traffic over them lands there.
func TestFlowsLandOnBuddyQueue(t *testing.T) {
	for _, profile := range []string{rss.ProfileToeplitz, rss.ProfileENAFixed, rss.ProfileENALinux} {
		t.Run(profile, func(t *testing.T) {
			cfg := testConfig()
			cfg.Workers = 4
			cfg.Flows = 8
			ln, err := lossytest.New(lossytest.Config{Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			eps := newCluster(t, 3, cfg, func(i int) transport.Path {
				rc, queues := shuffledRSS(t, profile, cfg.Workers, uint64(i+10))
				fp, err := ln.NewFastPathRSS(cfg.Workers, rc, queues)
				if err != nil {
					t.Fatal(err)
				}
				return fp
			})
			for _, a := range eps {
				for _, b := range eps {
					if a == b {
						continue
					}
					bi := b.Info()
					for w := range cfg.Workers {
						flows := a.Flows(b.ID(), w)
						if len(flows) != cfg.Flows {
							t.Fatalf("node %d worker %d: %d flows to node %d, want %d", a.ID(), w, len(flows), b.ID(), cfg.Flows)
						}
						seen := map[rss.PortPair]bool{}
						for _, pp := range flows {
							tu, err := rss.NewTuple(rss.ProtoUDP, a.Info().Addr, bi.Addr, pp.SrcPort, pp.DstPort)
							if err != nil {
								t.Fatal(err)
							}
							q := bi.RSS.RETA.Queue(bi.RSS.Profile.Hash(&tu))
							if q != bi.Queues[w] || pp.DstPort != bi.Ports[w] || seen[pp] ||
								pp.SrcPort < cfg.withDefaultsMust(t).MinPort || pp.SrcPort > cfg.withDefaultsMust(t).MaxPort {
								t.Errorf("node %d worker %d -> node %d: flow %d>%d lands on queue %d (buddy polls %d on port %d), duplicate %v",
									a.ID(), w, b.ID(), pp.SrcPort, pp.DstPort, q, bi.Queues[w], bi.Ports[w], seen[pp])
							}
							seen[pp] = true
						}
					}
				}
			}
			runTraffic(t, eps, trafficOpts{perPair: 100})
			if m := ln.Stats().Mistargeted; m != 0 {
				t.Errorf("%d datagrams landed on another worker's queue", m)
			}
		})
	}
}

func (c Config) withDefaultsMust(t *testing.T) Config {
	d, err := c.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
