package diagnose_test

import (
	"fmt"
	"time"

	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/counters/diagnose"
)

// A ring whose Bx ring overflowed while its core held 900 of 1024 entries.
func ExampleDiagnose() {
	var before, after counters.Snapshot
	before[counters.Packets] = 1000
	after[counters.Packets] = 9000
	after[counters.DropBxFull] = 250
	after[counters.BxOccupancy] = 900
	v := diagnose.Diagnose(diagnose.Input{Tenant: "kv", Interval: time.Second, Rings: []diagnose.Ring{
		{Queue: 0, AxSize: 128, BxSize: 1024, Before: before, After: after},
	}})
	fmt.Println(v.Primary, v.Lost, v.Findings[0].Evidence[0].Note)
	// Output: compute saturation 250 core busy: 900 of 1024 Bx entries unreleased at the end
}
