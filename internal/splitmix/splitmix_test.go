package splitmix

import "testing"

// The outputs of the reference generator (Vigna's splitmix64.c) seeded
// with 0 and 1234567.
func TestReference(t *testing.T) {
	for _, c := range []struct {
		seed uint64
		want []uint64
	}{
		{0, []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}},
		{1234567, []uint64{0x599ed017fb08fc85, 0x2c73f08458540fa5, 0x883ebce5a3f27c77}},
	} {
		s := c.seed
		for i, w := range c.want {
			if got := Next(&s); got != w {
				t.Errorf("seed %d, output %d: %#x, want %#x", c.seed, i, got, w)
			}
		}
		if s != c.seed+uint64(len(c.want))*gamma {
			t.Errorf("seed %d: state %#x after %d outputs", c.seed, s, len(c.want))
		}
	}
	if Mix(0) != 0xe220a8397b1dcdaf {
		t.Errorf("Mix(0) = %#x", Mix(0))
	}
}
