package rss_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vnic/vnic/rss"
)

// The first vector of Microsoft's RSS verification suite.
func ExampleHasher_HashTuple() {
	h, err := rss.NewHasher(rss.MicrosoftKey)
	if err != nil {
		panic(err)
	}
	t, err := rss.NewTuple(rss.ProtoTCP,
		netip.MustParseAddr("66.9.149.187"), netip.MustParseAddr("161.142.100.80"), 2794, 1766)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%#08x\n", h.HashTuple(&t))
	// Output: 0x51ccc178
}

// Steering a received frame: parse, hash, look the queue up.
func ExampleParse() {
	h, _ := rss.NewHasher(rss.MicrosoftKey)
	reta, _ := rss.NewRETA(rss.DefaultRETASize, 4)
	frame := rss.BuildUDP4(nil, [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2},
		netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), 1234, 5678, 18)

	var t rss.Tuple
	switch err := rss.Parse(frame, &t); {
	case errors.Is(err, rss.ErrNotIP), errors.Is(err, rss.ErrMalformed):
		fmt.Println("default queue:", err)
	case err == nil:
		hash := h.HashTuple(&t)
		fmt.Printf("%s: hash %#08x, queue %d\n", t.String(), hash, reta.Queue(hash))
	}
	// Output: udp 198.18.0.1:1234 > 198.18.0.2:5678: hash 0x6b1b86f5, queue 1
}

func ExampleRETA() {
	reta, _ := rss.NewRETA(8, 3)
	_ = reta.Set(7, 0) // steer entry 7 to queue 0
	entries := make([]int, reta.Size())
	for i := range entries {
		entries[i] = reta.Entry(i)
	}
	fmt.Println(entries)
	fmt.Println(reta.Index(0x51ccc178), reta.Queue(0x51ccc178))
	// Output:
	// [0 1 2 0 1 2 0 0]
	// 0 0
}

func ExampleResolve() {
	hash, index, queue, err := rss.Resolve(rss.Lookup{
		Src: netip.MustParseAddr("66.9.149.187"), Dst: netip.MustParseAddr("161.142.100.80"),
		SrcPort: 2794, DstPort: 1766, Proto: "tcp", Queues: 4,
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("hash %#08x index %d queue %d\n", hash, index, queue)
	// Output: hash 0x51ccc178 index 120 queue 0
}

func ExampleParseKey() {
	k, err := rss.ParseKey("symmetric")
	if err != nil {
		panic(err)
	}
	fmt.Println(k.String()[:23])
	// Output: 6d:5a:6d:5a:6d:5a:6d:5a
}
