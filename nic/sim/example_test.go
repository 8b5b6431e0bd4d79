package sim_test

import (
	"fmt"
	"time"

	"github.com/vnic/vnic/nic"
	"github.com/vnic/vnic/nic/sim"
)

// ExampleRun simulates 8 rxBisect queues for 10 ms of virtual time with
// core 0 at a quarter of the others' speed: only core 0's queue drops, and
// the other cores process everything offered to them.
func ExampleRun() {
	r, err := sim.Run(sim.Config{
		Model: nic.RxBisect, Queues: 8, AxSize: 128, BxSize: 1024, Buffers: 1536,
		Traffic:  sim.Traffic{Rate: 7_200_000}, // 90% of 8 × 1 Mpps, uniform
		CoreRate: 1_000_000, CoreRates: []uint64{250_000, 0, 0, 0, 0, 0, 0, 0},
		Duration: 10 * time.Millisecond, Seed: 1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, others := r.ThroughputExcept(0)
	fmt.Printf("offered %d, delivered %d, dropped %d (bx_full %d)\n", r.Offered, r.Delivered, r.Drops, r.DropBxFull)
	fmt.Printf("cores 1-7 processed %.0f%% of their packets\n", 100*others)
	// Output:
	// offered 72000, delivered 66585, dropped 5415 (bx_full 5415)
	// cores 1-7 processed 100% of their packets
}
