package vnicd

import (
	"fmt"

	"github.com/vnic/vnic/wire/synth"
)

// SynthFlags are the synthetic source's flags, as given.
type SynthFlags struct {
	FrameSize, Flows int
	Dist             string // uniform, zipf, queue-share or replay
	ZipfS, Rate      float64
	Bucket           int    // --rate-bucket
	DstPorts         string // --dst-ports: a port or a range
	Queues           int    // the demo tenant's (with local)
}

// Config makes the synthetic source's configuration and checks it as
// synth.New will. local is the demo, whose tenant's queues are known.
func (f SynthFlags) Config(local bool) (synth.Config, error) {
	var sc synth.Config
	dist, err := synth.ParseDist(f.Dist)
	if err != nil {
		return sc, fmt.Errorf("--dist: %w", err)
	}
	if !local && (dist == synth.QueueShare || dist == synth.Replay) {
		return sc, fmt.Errorf("--dist %s needs the tenant's queues, which the daemon learns only at attach; use uniform or zipf, or vnicd demo", dist)
	}
	sc = synth.Config{FrameSize: f.FrameSize, Flows: f.Flows, Dist: dist, Rate: f.Rate, Bucket: f.Bucket, Seed: 1}
	if sc.DstPortLo, sc.DstPortHi, err = ParsePortRange("--dst-ports", f.DstPorts); err != nil {
		return sc, err
	}
	if dist == synth.Zipf {
		sc.ZipfS = f.ZipfS
	}
	if local {
		sc.Queues = f.Queues
		switch dist {
		case synth.Replay:
			sc.Profile = synth.CAIDALike(sc.Queues, 60, 1)
		case synth.QueueShare:
			sc.Share = make([]float64, sc.Queues)
			for i := range sc.Share {
				sc.Share[i] = 1
			}
			sc.Share[0] = float64(sc.Queues) // one hot queue
		}
	}
	if err := sc.Validate(local); err != nil {
		return sc, fmt.Errorf("synthetic source (--frame-size, --flows, --dist, --zipf-s, --rate, --rate-bucket): %w", err)
	}
	return sc, nil
}
