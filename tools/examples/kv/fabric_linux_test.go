//go:build linux

package main

import (
	"context"
	"testing"
	"time"

	"github.com/vnic/vnic/tools/examples/internal/casestudy/casestudytest"
)

// The KV store on vnicd's fabric, at a small scale: the runner starts
// vnicd --source fabric, every node attaches as a host of it, secondary 2
// is killed half-way, and the live replicas match the acknowledged log;
// the replication messages came by the fast path (the fabric), not by
// TCP retransmission. No performance is asserted.
func TestFabricKVKilledReplica(t *testing.T) {
	o, fast, places := mustParse(t, []string{"-vnicd", casestudytest.Vnicd(t), "-fast", "fabric", "-place", "none", "-transport", "hot,bi", "-rates", "2000",
		"-duration", "600ms", "-conns", "2", "-keys", "200", "-kill"})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, tr := range o.Transports {
		row, err := step(ctx, o, places, fast, tr, 2000, 0)
		if err != nil {
			t.Fatalf("%s: %v", tr, err)
		}
		t.Logf("%s: %.0f/s answered (%d), %d failed; fast %d, TCP %d; NIC CPU-s %.3f; %s", tr, row.Throughput, row.Answered, row.Failed, row.DeliveredFast, row.DeliveredTCP, row.NICCPUs, row.Notes)
		if !row.Killed || !row.Verified {
			t.Errorf("%s: killed %v, verified %v: the replicas' check did not run", tr, row.Killed, row.Verified)
		}
		if row.Answered == 0 || row.Failed != 0 {
			t.Errorf("%s: %d updates answered, %d failed", tr, row.Answered, row.Failed)
		}
		if row.DeliveredFast == 0 || row.DeliveredFast < 4*row.DeliveredTCP {
			t.Errorf("%s: %d messages came by the fast path and %d by TCP: the fabric did not carry the replication", tr, row.DeliveredFast, row.DeliveredTCP)
		}
		if row.NICCPUs <= 0 {
			t.Errorf("%s: vnicd's CPU time was not counted (%.3f s)", tr, row.NICCPUs)
		}
	}
}

// The same with every node in a process of its own: each attaches to the
// fabric's vnicd by itself, secondary 2's process is killed half-way and
// the survivors match the log; vnicd's CPU is the NIC's, the node
// processes' the host's, the load client's apart.
func TestFabricKVProcsPerHost(t *testing.T) {
	o, fast, places := mustParse(t, []string{"-vnicd", casestudytest.Vnicd(t), "-fast", "fabric", "-procs", "per-host", "-place", "none", "-transport", "hot",
		"-rates", "2000", "-duration", "600ms", "-conns", "2", "-keys", "200", "-kill"})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	row, err := step(ctx, o, places, fast, "hot", 2000, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d answered; fast %d, TCP %d; host %.3f, client %.3f, NIC %.3f CPU-s; %s", row.Answered, row.DeliveredFast, row.DeliveredTCP, row.CPUs, row.ClientCPUs, row.NICCPUs, row.Notes)
	if !row.Killed || !row.Verified || row.Answered == 0 || row.Failed != 0 {
		t.Errorf("killed %v, verified %v, %d answered, %d failed", row.Killed, row.Verified, row.Answered, row.Failed)
	}
	if row.DeliveredFast == 0 || row.DeliveredFast < 4*row.DeliveredTCP {
		t.Errorf("%d messages came by the fast path and %d by TCP: the fabric did not carry the replication", row.DeliveredFast, row.DeliveredTCP)
	}
	if row.NICCPUs <= 0 || row.CPUs <= 0 || row.ClientCPUs <= 0 {
		t.Errorf("CPU-s not all counted: NIC %.3f, host %.3f, client %.3f", row.NICCPUs, row.CPUs, row.ClientCPUs)
	}
}
