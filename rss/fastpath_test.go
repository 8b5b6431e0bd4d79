package rss

import (
	"math/rand/v2"
	"testing"
)

// checkFastPath fails t if the one-pass IPv4 parser and the general parser
// disagree on frame: whenever the fast path takes a frame, the general one
// must accept it with the same tuple.
func checkFastPath(t *testing.T, frame []byte) bool {
	t.Helper()
	var fast, slow Tuple
	fast.Proto = 99 // the fast path must write every field
	_, took := parseUDPTCP4(frame, &fast, nil)
	err := parse(frame, &slow)
	if took && (err != nil || fast != slow) {
		t.Fatalf("frame % x: fast path %+v, general path %+v, %v", frame, fast, slow, err)
	}
	// The exported fast path (the engine's first try) is the same one,
	// and leaves *t alone when it declines.
	pub := Tuple{Proto: 77}
	if pt := ParseCommon(frame, &pub); pt != took || (took && pub != fast) || (!took && pub != Tuple{Proto: 77}) {
		t.Fatalf("frame % x: ParseCommon %v %+v, fast path %v %+v", frame, pt, pub, took, fast)
	}
	// The engine parses and hashes such a frame's bytes in place, in one
	// call.
	ph := Tuple{Proto: 77}
	hash, ok := fastPathHasher.ParseHashCommon(frame, &ph)
	if ok != took || (took && ph != fast) || (!took && ph != Tuple{Proto: 77}) {
		t.Fatalf("frame % x: ParseHashCommon %v %+v, fast path %v %+v", frame, ok, ph, took, fast)
	}
	if took {
		if want := fastPathHasher.HashTuple(&fast); hash != want {
			t.Fatalf("frame % x: ParseHashCommon's hash %#08x, HashTuple %#08x", frame, hash, want)
		}
		if got := fastPathHasher.HashIPv4Ports((*[12]byte)(frame[CommonHashInput : CommonHashInput+12])); got != hash {
			t.Fatalf("frame % x: HashIPv4Ports in place %#08x, ParseHashCommon %#08x", frame, got, hash)
		}
	}
	return took
}

var fastPathHasher, _ = NewHasher(MicrosoftKey)

// TestParseFastPathAgrees mutates every test frame byte by byte and length
// by length, and checks the fast path against the general parser on each.
func TestParseFastPathAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	took, total := 0, 0
	for _, c := range parseCases() {
		if checkFastPath(t, c.frame) {
			took++
		}
		total++
		for range 3000 {
			f := append([]byte(nil), c.frame...)
			for range 1 + rng.IntN(3) {
				if len(f) == 0 {
					break
				}
				switch rng.IntN(3) {
				case 0: // a byte of the headers
					f[rng.IntN(min(len(f), 60))] = byte(rng.Uint32())
				case 1: // a length field set to something near
					i := 14 + 2 + rng.IntN(2)*(20+4-2) // IPv4 total length or UDP length
					if i+1 < len(f) {
						f[i], f[i+1] = 0, byte(rng.IntN(80))
					}
				case 2: // truncate
					f = f[:rng.IntN(len(f)+1)]
				}
			}
			if checkFastPath(t, f) {
				took++
			}
			total++
		}
	}
	if took == 0 || took == total {
		t.Fatalf("fast path took %d of %d frames: the test does not exercise both paths", took, total)
	}
	t.Logf("fast path took %d of %d frames", took, total)
}
