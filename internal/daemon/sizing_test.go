package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/testutil"
)

// TestDefaultAxFollowsSizingRule: a tenant that does not choose its ring
// sizes gets Ax rings that together fill a Bx ring (k·|Ax| >= |Bx|),
// whatever its queue count; one that chooses keeps its choice.
func TestDefaultAxFollowsSizingRule(t *testing.T) {
	td := startDaemon(t, testutil.NewPaced(0, time.Hour, 1), func(c *daemon.Config) { c.AxSize, c.BxSize = 128, 1024 })
	for _, c := range []struct{ queues, ask, want int }{{1, 0, 1024}, {2, 0, 512}, {4, 0, 256}, {8, 0, 128}, {16, 0, 128}, {4, 64, 64}} {
		ten, err := client.Attach(context.Background(), td.socket, client.AttachOptions{Name: "sized", Queues: c.queues, AxSize: c.ask, Match: client.Match{Default: true}})
		if err != nil {
			t.Fatal(err)
		}
		if got := int(ten.Region.Geo.AxSize); got != c.want {
			t.Errorf("%d queues asking Ax %d: got Ax %d, want %d", c.queues, c.ask, got, c.want)
		}
		ten.Close()
	}
}
