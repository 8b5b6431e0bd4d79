package xsk_test

import (
	"context"
	"log"
	"time"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/xsk"
)

// Open a receive-only source on queues 0 and 1, registered in the XDP
// program's XSKMAP, and hand frames to a consumer until ctx ends.
func ExampleNewSource() {
	objs, err := bpf.Load(bpf.Options{Config: bpf.Config{Claims: []bpf.Claim{{Proto: 17, PortLo: 9000, PortHi: 9099}}}})
	if err != nil {
		log.Fatal(err)
	}
	defer objs.Close()
	const ifindex = 2
	l, mode, err := objs.Attach(ifindex, bpf.ModeAuto)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	src, err := xsk.NewSource(xsk.SourceConfig{
		Ifindex: ifindex,
		Queues:  []int{0, 1},
		Socket:  xsk.DefaultConfig(),
		Map:     objs,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	log.Printf("XDP %v mode, AF_XDP %v mode", mode, src.Mode())

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	batch := make([][]byte, 0, 64)
	for ctx.Err() == nil {
		batch, err = src.Recv(batch[:0])
		if err != nil {
			log.Fatal(err)
		}
		for _, frame := range batch {
			_ = frame // valid until the next Recv
		}
		if len(batch) == 0 {
			src.Poll(10 * time.Millisecond)
		}
	}
}
