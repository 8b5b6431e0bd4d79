package rss

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
)

// randomSetup returns a random profile (random key where the profile takes
// one), a RETA of 8 to 512 entries over 1 to 16 queues assigned at random,
// and random addresses, IPv4 or IPv6.
func randomSetup(t testing.TB, r *rand.Rand) (Config, netip.Addr, netip.Addr) {
	t.Helper()
	var seed [32]byte
	for i := range seed {
		seed[i] = byte(r.Uint32())
	}
	key, err := RandomKey(rand.NewChaCha8(seed))
	if err != nil {
		t.Fatal(err)
	}
	var p Profile
	switch r.IntN(3) {
	case 0:
		p = mustProfile(t, ProfileToeplitz, key)
	case 1:
		p = mustProfile(t, ProfileENAFixed, nil)
	default:
		p = mustProfile(t, ProfileENALinux, key)
	}
	size := 8 << r.IntN(7) // 8..512
	reta := randomRETA(r, size, 1+r.IntN(16))
	tup := randomTuple(r, r.IntN(2) == 1)
	return Config{p, reta}, tup.SrcAddr(), tup.DstAddr()
}

// check verifies pairs independently of the picker: every pair lands on
// queue by Profile.Hash and the original RETA, the pairs are distinct and
// every chosen port is within the options.
func check(t *testing.T, cfg Config, src, dst netip.Addr, queue int, opts PickOptions, pairs []PortPair) {
	t.Helper()
	lo, hi := opts.MinPort, opts.MaxPort
	if lo == 0 {
		lo = DefaultMinPort
	}
	if hi == 0 {
		hi = 0xffff
	}
	seen := make(map[PortPair]bool, len(pairs))
	for _, p := range pairs {
		tup, err := NewTuple(ProtoUDP, src, dst, p.SrcPort, p.DstPort)
		if err != nil {
			t.Fatal(err)
		}
		if q := cfg.RETA.Queue(cfg.Profile.Hash(&tup)); q != queue {
			t.Fatalf("%s %s: %v lands on queue %d, want %d", cfg.Profile.Name, tup.String(), p, q, queue)
		}
		if seen[p] {
			t.Fatalf("%s: pair %v returned twice", cfg.Profile.Name, p)
		}
		seen[p] = true
		if p.SrcPort < lo || p.SrcPort > hi {
			t.Fatalf("%s: source port %d outside %d..%d", cfg.Profile.Name, p.SrcPort, lo, hi)
		}
		if opts.FixedDstPort != 0 {
			if p.DstPort != opts.FixedDstPort {
				t.Fatalf("%s: destination port %d, fixed at %d", cfg.Profile.Name, p.DstPort, opts.FixedDstPort)
			}
		} else if p.DstPort < lo || p.DstPort > hi {
			t.Fatalf("%s: destination port %d outside %d..%d", cfg.Profile.Name, p.DstPort, lo, hi)
		}
	}
}

func queuesOf(reta *RETA) []int {
	var qs []int
	for i := range reta.Size() {
		if !slices.Contains(qs, reta.Entry(i)) {
			qs = append(qs, reta.Entry(i))
		}
	}
	slices.Sort(qs)
	return qs
}

func TestPickRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	trials := 200
	if testing.Short() {
		trials = 40
	}
	picked, short := 0, 0
	for trial := range trials {
		cfg, src, dst := randomSetup(t, r)
		pp, err := NewPortPicker(cfg, src, dst)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		for _, q := range queuesOf(cfg.RETA) {
			opts := PickOptions{Seed: r.Uint64()}
			switch r.IntN(4) {
			case 0:
				opts.MinPort = uint16(1 + r.IntN(40000))
			case 1:
				opts.MinPort, opts.MaxPort = 1, 32767
			case 2:
				opts.FixedDstPort = uint16(1 + r.IntN(65535))
			}
			k := 1 + r.IntN(64)
			pairs, err := pp.Pick(q, k, opts)
			if err != nil {
				// With a fixed port some queues can hold fewer than k
				// flows; the brute-force test checks those counts.
				if opts.FixedDstPort != 0 && strings.Contains(err.Error(), "distinct UDP flows") {
					short++
					continue
				}
				t.Fatalf("trial %d (%s, RETA %d, %s > %s): Pick(%d, %d, %+v): %v", trial, cfg.Profile.Name, cfg.RETA.Size(), src, dst, q, k, opts, err)
			}
			if len(pairs) != k {
				t.Fatalf("trial %d: %d pairs, want %d", trial, len(pairs), k)
			}
			check(t, cfg, src, dst, q, opts, pairs)
			picked++
		}
	}
	t.Logf("%d picks checked, %d had fewer than k flows with the fixed port", picked, short)
}

// TestPickBruteForce fixes the destination port, finds by brute force every
// source port (of 65536) that lands on each queue, and checks that the
// solver enumerates exactly that set: asking for all of them returns them
// all, asking for one more fails.
func TestPickBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 13))
	trials := 24
	if testing.Short() {
		trials = 6
	}
	for trial := range trials {
		cfg, src, dst := randomSetup(t, r)
		switch trial { // make sure every profile is covered
		case 0:
			cfg.Profile = mustProfile(t, ProfileToeplitz, awsExampleKey)
		case 1:
			cfg.Profile = mustProfile(t, ProfileENAFixed, nil)
		case 2:
			cfg.Profile = mustProfile(t, ProfileENALinux, awsExampleKey)
		}
		pp, err := NewPortPicker(cfg, src, dst)
		if err != nil {
			t.Fatal(err)
		}
		opts := PickOptions{FixedDstPort: uint16(1 + r.IntN(65535)), MinPort: 1, Seed: r.Uint64()}
		if trial%2 == 1 {
			opts.MinPort = DefaultMinPort
		}
		want := map[int][]PortPair{}
		for s := range 1 << 16 {
			if s < int(opts.MinPort) {
				continue
			}
			tup, _ := NewTuple(ProtoUDP, src, dst, uint16(s), opts.FixedDstPort)
			q := cfg.RETA.Queue(cfg.Profile.Hash(&tup))
			want[q] = append(want[q], PortPair{uint16(s), opts.FixedDstPort})
		}
		for _, q := range queuesOf(cfg.RETA) {
			n := len(want[q])
			if n == 0 {
				if _, err := pp.Pick(q, 1, opts); err == nil || !strings.Contains(err.Error(), "no UDP flow") {
					t.Fatalf("trial %d: queue %d is unreachable, Pick error %v", trial, q, err)
				}
				continue
			}
			got, err := pp.Pick(q, n, opts)
			if err != nil {
				t.Fatalf("trial %d (%s, RETA %d, dport %d): Pick(%d, %d): %v", trial, cfg.Profile.Name, cfg.RETA.Size(), opts.FixedDstPort, q, n, err)
			}
			check(t, cfg, src, dst, q, opts, got)
			slices.SortFunc(got, func(a, b PortPair) int { return int(a.SrcPort) - int(b.SrcPort) })
			if !slices.Equal(got, want[q]) {
				t.Fatalf("trial %d (%s): queue %d: solver found %d pairs, brute force %d", trial, cfg.Profile.Name, q, len(got), n)
			}
			_, err = pp.Pick(q, n+1, opts)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("only %d distinct", n)) {
				t.Fatalf("trial %d: Pick(%d, %d) with %d solutions: %v", trial, q, n+1, n, err)
			}
		}
	}
}

// TestPickBruteForceFreePorts checks completeness with both ports free:
// with a 65536-entry RETA (16 hash bits fixed) and a queue that owns 16
// entries, the solver can walk every solution, and those within a
// 1024x1024 port box must be exactly the flows brute force finds there.
// For ena-fixed this covers both orientations of each sorted solution.
func TestPickBruteForceFreePorts(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 17))
	for _, name := range []string{ProfileToeplitz, ProfileENAFixed, ProfileENALinux} {
		var key Key
		if name != ProfileENAFixed {
			key = awsExampleKey
		}
		reta, _ := NewRETA(MaxRETASize, 2)
		for i := range MaxRETASize {
			_ = reta.Set(i, 0)
		}
		for range 16 {
			_ = reta.Set(r.IntN(MaxRETASize), 1)
		}
		cfg := Config{mustProfile(t, name, key), reta}
		tup := randomTuple(r, name == ProfileENALinux)
		src, dst := tup.SrcAddr(), tup.DstAddr()
		pp, err := NewPortPicker(cfg, src, dst)
		if err != nil {
			t.Fatal(err)
		}
		lo := uint16(20000 + r.IntN(40000))
		opts := PickOptions{MinPort: lo, MaxPort: lo + 1023, Seed: r.Uint64()}
		var want []PortPair
		for s := int(lo); s <= int(opts.MaxPort); s++ {
			for d := int(lo); d <= int(opts.MaxPort); d++ {
				if p := (PortPair{uint16(s), uint16(d)}); pp.Queue(p) == 1 {
					want = append(want, p)
				}
			}
		}
		if len(want) < 16 {
			t.Fatalf("%s: only %d flows in the box; pick another seed", name, len(want))
		}
		got, err := pp.Pick(1, len(want), opts)
		if err != nil {
			t.Fatalf("%s: Pick(1, %d): %v", name, len(want), err)
		}
		check(t, cfg, src, dst, 1, opts, got)
		cmp := func(a, b PortPair) int {
			if a.SrcPort != b.SrcPort {
				return int(a.SrcPort) - int(b.SrcPort)
			}
			return int(a.DstPort) - int(b.DstPort)
		}
		slices.SortFunc(got, cmp)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: solver found %d flows, brute force %d", name, len(got), len(want))
		}
		if _, err := pp.Pick(1, len(want)+1, opts); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("only %d distinct", len(want))) {
			t.Fatalf("%s: Pick(1, %d): %v", name, len(want)+1, err)
		}
		t.Logf("%s: %d flows in the box", name, len(want))
	}
}

// TestPickENAFixedBothOrientations checks, for the symmetric profile without
// a fixed port, that both (a, b) and (b, a) of a solution are found: the
// full solution set of a tiny port range is compared with brute force.
func TestPickENAFixedBothOrientations(t *testing.T) {
	p := mustProfile(t, ProfileENAFixed, nil)
	reta, _ := NewRETA(8, 2)
	cfg := Config{p, reta}
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	pp, err := NewPortPicker(cfg, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	// Ports 65528..65535: F = 32 - 3 free bits, too many to enumerate with
	// a range filter, so fix the destination instead and compare both
	// queues' counts with the sum over all destinations of a small range.
	total := 0
	for d := uint16(65528); d != 0; d++ {
		opts := PickOptions{FixedDstPort: d, MinPort: 65528}
		for q := range 2 {
			var want int
			for s := 65528; s <= 65535; s++ {
				if pp.Queue(PortPair{uint16(s), d}) == q {
					want++
				}
			}
			if want == 0 {
				continue
			}
			got, err := pp.Pick(q, want, opts)
			if err != nil {
				t.Fatalf("dport %d queue %d: %v", d, q, err)
			}
			check(t, cfg, src, dst, q, opts, got)
			total += len(got)
		}
	}
	if total != 64 {
		t.Fatalf("found %d flows in 8x8 ports, want 64", total)
	}
	// Free ports: every returned pair's mirror lands on the same queue.
	pairs, err := pp.Pick(1, 200, PickOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	check(t, cfg, src, dst, 1, PickOptions{}, pairs)
	mirrored := 0
	set := map[PortPair]bool{}
	for _, p := range pairs {
		set[p] = true
	}
	for _, p := range pairs {
		if set[PortPair{p.DstPort, p.SrcPort}] {
			mirrored++
		}
	}
	t.Logf("%d of %d pairs come with their mirror", mirrored, len(pairs))
}

func TestPickSpreadsOverEntries(t *testing.T) {
	reta, _ := NewRETA(128, 4) // queue 1 has entries 1, 5, ..., 125
	cfg := Config{mustProfile(t, ProfileToeplitz, nil), reta}
	pp, err := NewPortPicker(cfg, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := pp.Pick(1, 32, PickOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entries := map[int]bool{}
	for _, p := range pairs {
		tup, _ := NewTuple(ProtoUDP, pp.src, pp.dst, p.SrcPort, p.DstPort)
		entries[reta.Index(cfg.Profile.Hash(&tup))] = true
	}
	if len(entries) != 32 {
		t.Errorf("32 pairs use %d RETA entries, want all 32 of queue 1", len(entries))
	}
}

func TestPickDeterministic(t *testing.T) {
	reta, _ := NewRETA(128, 8)
	cfg := Config{mustProfile(t, ProfileToeplitz, nil), reta}
	pp, err := NewPortPicker(cfg, netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := pp.Pick(3, 8, PickOptions{Seed: 42})
	b, _ := pp.Pick(3, 8, PickOptions{Seed: 42})
	c, _ := pp.Pick(3, 8, PickOptions{Seed: 43})
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different pairs: %v, %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("different seeds, same pairs: %v", a)
	}
}

func TestPickErrors(t *testing.T) {
	reta, _ := NewRETA(128, 4)
	cfg := Config{mustProfile(t, ProfileToeplitz, nil), reta}
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	pp, err := NewPortPicker(cfg, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	gappy, _ := NewRETA(8, 8)
	for i, q := range []int{0, 1, 3, 5, 6, 7, 0, 1} {
		_ = gappy.Set(i, q)
	}
	ppGappy, err := NewPortPicker(Config{cfg.Profile, gappy}, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	// A zero key hashes everything to 0: only entry 0 is reachable.
	zero, err := NewPortPicker(Config{mustProfile(t, ProfileToeplitz, make(Key, KeyLen)), reta}, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pp    *PortPicker
		queue int
		k     int
		opts  PickOptions
		msg   string
	}{
		{pp, 5, 1, PickOptions{}, "rss: queue 5 has no RETA entry; the receiver's table maps to queues 0..3"},
		{pp, -1, 1, PickOptions{}, "rss: queue -1 has no RETA entry"},
		{ppGappy, 2, 1, PickOptions{}, "maps to queues 0..1, 3, 5..7"},
		{pp, 0, 0, PickOptions{}, "ask for at least 1"},
		{pp, 0, 1, PickOptions{MinPort: 2000, MaxPort: 1999}, "port range 2000..1999 is empty"},
		{zero, 1, 1, PickOptions{}, "no UDP flow from 10.0.0.1 to 10.0.0.2 with ports 1024..65535 lands on queue 1"},
		{pp, 0, 2, PickOptions{MinPort: 40000, MaxPort: 40000}, "too narrow"},
	} {
		_, err := c.pp.Pick(c.queue, c.k, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Pick(%d, %d, %+v) error = %v, want %q", c.queue, c.k, c.opts, err, c.msg)
		}
	}
	// The zero key reaches queue 0 through entry 0.
	if pairs, err := zero.Pick(0, 4, PickOptions{}); err != nil || len(pairs) != 4 {
		t.Errorf("zero key, queue 0: %v, %v", pairs, err)
	}

	for _, c := range []struct {
		cfg      Config
		src, dst netip.Addr
		msg      string
	}{
		{Config{Profile: cfg.Profile}, src, dst, "no RETA"},
		{Config{Profile{Name: "crc32", Key: MicrosoftKey}, reta}, src, dst, "unknown hash profile"},
		{cfg, src, netip.MustParseAddr("::1"), "different families"},
		{cfg, netip.Addr{}, dst, "missing address"},
	} {
		if _, err := NewPortPicker(c.cfg, c.src, c.dst); err == nil || !strings.HasPrefix(err.Error(), "rss: ") || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("NewPortPicker: error %v, want %q", err, c.msg)
		}
	}
}

// TestPickNeverReturnsWrongPair corrupts the picker's linear model: Pick
// must notice when verifying instead of returning a pair that lands
// elsewhere.
func TestPickNeverReturnsWrongPair(t *testing.T) {
	reta, _ := NewRETA(128, 4)
	cfg := Config{mustProfile(t, ProfileToeplitz, nil), reta}
	pp, err := NewPortPicker(cfg, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	bad := *pp
	for j := range bad.col {
		bad.col[j] ^= 1
	}
	_, err = bad.Pick(1, 8, PickOptions{})
	if err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Fatalf("corrupted model: error %v", err)
	}
}

// TestPickLiteralProfile: a Profile literal (not from ParseProfile) works
// in a Config, as it would after a caller fills the fields by hand.
func TestPickLiteralProfile(t *testing.T) {
	reta, _ := NewRETA(64, 4)
	cfg := Config{Profile{Name: ProfileENAFixed, Key: ENAFixedKey}, reta}
	src, dst := netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.1.0.2")
	pp, err := NewPortPicker(cfg, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := pp.Pick(2, 8, PickOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Profile = mustProfile(t, ProfileENAFixed, nil)
	check(t, cfg, src, dst, 2, PickOptions{}, pairs)
}

// TestPickSnapshot: changing the RETA after NewPortPicker does not change
// the picker's answers.
func TestPickSnapshot(t *testing.T) {
	reta, _ := NewRETA(16, 2)
	cfg := Config{mustProfile(t, ProfileToeplitz, nil), reta}
	src, dst := netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.1.0.2")
	pp, _ := NewPortPicker(cfg, src, dst)
	before, _ := pp.Pick(1, 8, PickOptions{})
	for i := range 16 {
		_ = reta.Set(i, 0)
	}
	after, err := pp.Pick(1, 8, PickOptions{})
	if err != nil || !slices.Equal(before, after) {
		t.Fatalf("after RETA change: %v, %v (before %v)", after, err, before)
	}
}

func TestPickConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 15))
	cfg, src, dst := randomSetup(t, r)
	pp, err := NewPortPicker(cfg, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	qs := queuesOf(cfg.RETA)
	want := make([][]PortPair, len(qs))
	for i, q := range qs {
		if want[i], err = pp.Pick(q, 16, PickOptions{Seed: 9}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i, q := range qs {
				got, err := pp.Pick(q, 16, PickOptions{Seed: 9})
				if err != nil || !slices.Equal(got, want[i]) {
					t.Errorf("goroutine %d queue %d: %v, %v", g, q, got, err)
				}
			}
		})
	}
	wg.Wait()
}

func TestPermuteIsBijection(t *testing.T) {
	for nbits := range uint(13) {
		seen := make([]bool, 1<<nbits)
		for x := range uint64(1) << nbits {
			y := permute(x, nbits, 0x1234567, 0x89abcdef)
			if seen[y] {
				t.Fatalf("nbits %d: %d hit twice", nbits, y)
			}
			seen[y] = true
		}
	}
}

func ExamplePortPicker() {
	// The receiver ships its hash profile and RETA over the control
	// connection; the sender solves for ports that land on worker 3.
	reta, _ := NewRETA(DefaultRETASize, 8)
	profile, _ := ParseProfile(ProfileENAFixed, nil)
	wire, _ := Config{Profile: profile, RETA: reta}.MarshalBinary()

	var cfg Config
	if err := cfg.UnmarshalBinary(wire); err != nil {
		panic(err)
	}
	pp, err := NewPortPicker(cfg, netip.MustParseAddr("172.31.0.10"), netip.MustParseAddr("172.31.0.20"))
	if err != nil {
		panic(err)
	}
	pairs, err := pp.Pick(3, 8, PickOptions{FixedDstPort: 9000})
	if err != nil {
		panic(err)
	}
	for _, p := range pairs {
		if pp.Queue(p) != 3 || p.DstPort != 9000 {
			panic("wrong pair")
		}
	}
	fmt.Println(len(pairs), "flows to port 9000 land on queue 3")
	// Output: 8 flows to port 9000 land on queue 3
}

func BenchmarkPick(b *testing.B) {
	reta, _ := NewRETA(DefaultRETASize, 8)
	for _, name := range []string{ProfileToeplitz, ProfileENAFixed} {
		cfg := Config{mustProfile(b, name, nil), reta}
		pp, err := NewPortPicker(cfg, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"))
		if err != nil {
			b.Fatal(err)
		}
		for _, fixed := range []uint16{0, 9000} {
			b.Run(fmt.Sprintf("%s/dport=%d", name, fixed), func(b *testing.B) {
				var seed uint64
				for b.Loop() {
					seed++
					if _, err := pp.Pick(int(seed%8), 8, PickOptions{FixedDstPort: fixed, Seed: seed}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkNewPortPicker(b *testing.B) {
	reta, _ := NewRETA(DefaultRETASize, 8)
	cfg := Config{mustProfile(b, ProfileToeplitz, nil), reta}
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	for b.Loop() {
		if _, err := NewPortPicker(cfg, src, dst); err != nil {
			b.Fatal(err)
		}
	}
}
