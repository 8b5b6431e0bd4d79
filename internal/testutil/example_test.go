package testutil_test

import (
	"testing"

	"github.com/vnic/vnic/internal/testutil"
)

// A privileged test: skip without the capability, build two namespaces
// and a 2-queue veth pair, and work inside one of them.
func ExampleVethPair() {
	_ = func(t *testing.T) {
		testutil.RequireNetAdmin(t)
		a := testutil.NewNetns(t, "a")
		b := testutil.NewNetns(t, "b")
		v := testutil.VethPair(t, a, b, "va0", "vb0", 2)
		err := a.Do(func() error {
			// Sockets, BPF links and AF_XDP sockets created here live in a.
			_ = v.A.Index
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
