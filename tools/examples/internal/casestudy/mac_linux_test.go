package casestudy

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/vnic/vnic/internal/testbed"
	"github.com/vnic/vnic/internal/testutil"
)

// TestIntegrationHostMAC: hostMAC reads each testbed host's interface
// address from inside its namespace: the address the testbed gave it. A
// missing namespace is an error that says so.
func TestIntegrationHostMAC(t *testing.T) {
	testutil.RequireNetAdmin(t)
	cfg := testbed.Config{Prefix: fmt.Sprintf("mc%d", os.Getpid()%10000), Hosts: 2}
	tb := testutil.Testbed(t, cfg)
	for i, h := range tb.Hosts {
		mac, err := hostMAC(cfg.Prefix, i)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mac[:], h.MAC) {
			t.Fatalf("host %d: hostMAC %x, the testbed gave %v", i, mac, h.MAC)
		}
	}
	if _, err := hostMAC(cfg.Prefix, len(tb.Hosts)); err == nil {
		t.Fatal("hostMAC of a host that does not exist: no error")
	}
}
