package testutil

import (
	"testing"

	"github.com/vnic/vnic/internal/vnicd"
	"github.com/vnic/vnic/nic/fabric"
)

// StartFabricDaemon runs an in-process daemon whose source and TX sink are
// an emulated network of config fc, as vnicd run --source fabric builds
// it (tenants must attach as hosts, each host's ledger is in TStats), and
// returns it with the fabric.
func StartFabricDaemon(tb testing.TB, fc fabric.Config) (*Daemon, *fabric.Fabric) {
	tb.Helper()
	fab, err := fabric.New(fc)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := DaemonConfig(tb, fab.Source())
	cfg.SourceName, cfg.Engine.Tx, cfg.TxSize, cfg.Hooks = "fabric", fab, 256, vnicd.FabricHooks(fab)
	cfg.Offloads.TxChecksum = true // as vnicd run --source fabric
	return StartDaemon(tb, cfg), fab
}
