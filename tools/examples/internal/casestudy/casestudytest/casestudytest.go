// Package casestudytest is the test set-up the case studies' tests
// (examples/kv and examples/shuffle) share.
package casestudytest

import (
	"testing"

	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/bichannel/transport/lossytest"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/tools/examples/internal/casestudy"
)

// Vnicd builds vnicd once per test binary (testutil.MustBuild) and returns
// its path; the test binary's TestMain removes it (testutil.RemoveBuilt).
func Vnicd(t testing.TB) string {
	t.Helper()
	return testutil.MustBuild(t, testutil.VnicdPkg)
}

// LossyNet starts an in-process lossy network with cfg and returns it with
// a ClusterConfig.FastPath of fast paths of workers workers on it. When the
// test ends, after its deferred calls (close the cluster there), it waits
// for the network's delayed datagrams.
func LossyNet(t testing.TB, cfg lossytest.Config, workers int) (*lossytest.Net, func(int) transport.Path) {
	t.Helper()
	ln, err := lossytest.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ln.Wait)
	return ln, casestudy.LossyFastPaths(ln, workers)
}
