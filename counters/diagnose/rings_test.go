package diagnose_test

import (
	"testing"

	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/counters/diagnose"
)

// TestSaturatedRingListedOnce: a ring that loses frames both to a full Bx
// ring and to starvation while its core sits on its buffers is one
// compute-saturated ring, listed once.
func TestSaturatedRingListedOnce(t *testing.T) {
	var after counters.Snapshot
	after[counters.Packets], after[counters.DropBxFull], after[counters.DropAxStarved] = 1000, 50, 7
	after[counters.BxOccupancy] = 256
	v := diagnose.Diagnose(diagnose.Input{Tenant: "t", Rings: []diagnose.Ring{{Queue: 0, AxSize: 128, BxSize: 256, After: after}}})
	if len(v.Findings) != 1 || v.Findings[0].Cause != diagnose.ComputeSaturation || v.Findings[0].Lost != 57 {
		t.Fatalf("findings %+v", v.Findings)
	}
	if r := v.Findings[0].Rings; len(r) != 1 || r[0] != 0 {
		t.Errorf("rings %v, want [0]", r)
	}
}
