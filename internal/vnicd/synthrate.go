package vnicd

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/wire/synth"
)

// SynthRateEvery is how often vnicd compares the synthetic source's
// generated rate with --rate.
const SynthRateEvery = 5 * time.Second

// synthShortFraction: a rate below this fraction of --rate is reported as
// short (the token bucket's jitter stays well above it).
const synthShortFraction = 0.95

// RateCheck compares, interval by interval, the frames the synthetic
// source generated with the rate it was asked for (--rate). It is a pure
// function of its inputs: Observe is given the clock and the running
// count.
type RateCheck struct {
	Target float64 // --rate, packets per second; 0: unlimited, nothing to report
	start  time.Time
	count  uint64
	short  bool // the last interval was short
	begun  bool
}

// Observe takes the total of frames generated at now and, once an interval
// of at least SynthRateEvery has passed since the last one it measured,
// returns the sentence to log: each interval whose rate is short of
// Target says so, the first interval back at Target after short ones
// says that. Otherwise it returns "".
func (c *RateCheck) Observe(now time.Time, generated uint64) string {
	if !c.begun {
		c.start, c.count, c.begun = now, generated, true
		return ""
	}
	d := now.Sub(c.start)
	if c.Target <= 0 || d < SynthRateEvery {
		return ""
	}
	rate := float64(generated-c.count) / d.Seconds()
	c.start, c.count = now, generated
	switch {
	case rate < synthShortFraction*c.Target:
		c.short = true
		return fmt.Sprintf("synth: generating %.0f packets/s, short of --rate %.0f: the engine does not pull frames faster (its CPU is the limit, or --policy pause waits for buffers)", rate, c.Target)
	case c.short:
		c.short = false
		return fmt.Sprintf("synth: generating %.0f packets/s again, as --rate %.0f asks", rate, c.Target)
	}
	return ""
}

// countingSynth is the synthetic source counting the frames it generated.
type countingSynth struct {
	gen *synth.Generator
	n   atomic.Uint64
}

func (s *countingSynth) Recv(dst [][]byte) ([][]byte, error) {
	out := s.gen.Next(dst)
	s.n.Add(uint64(len(out) - len(dst)))
	return out, nil
}

var _ nic.Source = (*countingSynth)(nil)

// watchSynthRate logs, every SynthRateEvery until stop is closed, whether
// the source generates what target asks (RateCheck).
func watchSynthRate(s *countingSynth, target float64, log func(string), stop <-chan struct{}) {
	c := RateCheck{Target: target}
	c.Observe(time.Now(), s.n.Load())
	t := time.NewTicker(SynthRateEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if msg := c.Observe(now, s.n.Load()); msg != "" {
				log(msg)
			}
		}
	}
}
