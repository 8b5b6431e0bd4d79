package synth_test

import (
	"fmt"
	"log"

	"github.com/vnic/vnic/wire/synth"
)

func ExampleNew() {
	const queues = 4
	// Stand-in for RSS: steer by source port. The NIC's caller would pass
	// its Toeplitz hash and indirection table here.
	queueOf := func(f synth.Flow) int { return int(f.SrcPort) % queues }
	g, err := synth.New(synth.Config{
		FrameSize: 64,
		Flows:     64,
		Dist:      synth.Replay,
		Profile:   synth.CAIDALike(queues, 10, 1),
		Queues:    queues,
		Seed:      1,
	}, queueOf)
	if err != nil {
		log.Fatal(err)
	}
	f := g.Flows()[0]
	fmt.Printf("flow 0: %v:%d -> %v:%d on queue %d\n", f.Src, f.SrcPort, f.Dst, f.DstPort, g.FlowQueue(0))

	batch := make([][]byte, 0, 32) // reused: Next allocates nothing
	batch = g.Next(batch[:0])
	fmt.Println(len(batch), "frames of", len(batch[0]), "bytes")
	// Output:
	// flow 0: 198.18.0.1:1024 -> 198.19.0.1:65535 on queue 0
	// 32 frames of 64 bytes
}

func ExampleCAIDALike() {
	p := synth.CAIDALike(8, 3, 7)
	for k, s := range p.Shares {
		r := synth.Imbalance(s)
		fmt.Printf("interval %d: max/min within 3.25..4.33: %v\n", k, r >= 3.25 && r <= 4.33)
	}
	// Output:
	// interval 0: max/min within 3.25..4.33: true
	// interval 1: max/min within 3.25..4.33: true
	// interval 2: max/min within 3.25..4.33: true
}
