// Package splitmix is SplitMix64 (Steele, Lea and Flood, "Fast splittable
// pseudorandom number generators", 2014): a 64-bit mixer, and the
// generator that steps its state by the golden gamma, for seeded choices
// that must repeat.
package splitmix

// gamma is the golden gamma, 2^64 / φ, odd.
const gamma = 0x9e3779b97f4a7c15

// Mix is SplitMix64's output for state x: x + gamma, mixed.
func Mix(x uint64) uint64 {
	x += gamma
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Next is the generator: it steps the state *s by gamma and returns the
// output for the old state, Mix(*s).
func Next(s *uint64) uint64 {
	x := *s
	*s = x + gamma
	return Mix(x)
}
