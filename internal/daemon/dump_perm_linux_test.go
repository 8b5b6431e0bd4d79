package daemon

import (
	"os"
	"testing"

	"github.com/vnic/vnic/internal/proto"
)

// TestMayDump: root, vnicd's own uid and the tenant's owner may capture a
// tenant's frames; another member of the socket's group may not.
func TestMayDump(t *testing.T) {
	ten := &tenant{info: proto.TenantInfo{Name: "app", UID: 1234}}
	for _, c := range []struct {
		uid  uint32
		want bool
	}{{0, true}, {uint32(os.Geteuid()), true}, {1234, true}, {1235, os.Geteuid() == 1235}, {65534, os.Geteuid() == 65534}} {
		if got := mayDump(c.uid, ten); got != c.want {
			t.Errorf("uid %d dumping uid 1234's tenant: %v, want %v", c.uid, got, c.want)
		}
	}
}
