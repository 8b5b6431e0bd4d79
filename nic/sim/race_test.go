//go:build race

package sim

// The race detector slows the simulator about twentyfold: shorten the
// experiments further under it.
func init() { testOpts.Scale = 0.03 }
