//go:build linux

package main

import (
	"context"
	"testing"
	"time"

	"github.com/vnic/vnic/tools/examples/internal/casestudy/casestudytest"
)

// The shuffle on vnicd's fabric, at a small scale, with 1,400-byte and
// 8 KiB messages: the runner starts vnicd --source fabric, every host
// attaches as a host of it, every row arrives exactly once (Run checks
// counts and checksums), and the messages came by the fast path. No
// performance is asserted.
func TestFabricShuffle(t *testing.T) {
	var nicCPU float64 // vnicd's CPU time, in clock ticks of 10 ms: summed over the runs
	for _, msg := range []string{"1400", "8192"} {
		t.Run(msg, func(t *testing.T) {
			o, fast, places := mustParse(t, []string{"-vnicd", casestudytest.Vnicd(t), "-fast", "fabric", "-place", "none", "-transport", "bi", "-hosts", "3", "-rows", "60000", "-msg", msg})
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			tabs := make([]*Table, o.hosts)
			for i := range tabs {
				tabs[i] = GenTable(i, o.rows[0], 1)
			}
			row, st, err := measure(ctx, o, places, fast, "bi", tabs, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%.1f MB in %.3f s; sent %d, fast %d, TCP %d; NIC CPU-s %.3f", row.NetMB, row.Seconds, st.Sent, st.DeliveredFast, st.DeliveredTCP, row.NICCPUs)
			if st.Sent == 0 || st.DeliveredFast+st.DeliveredTCP != st.Sent {
				t.Errorf("sent %d, delivered fast %d + TCP %d", st.Sent, st.DeliveredFast, st.DeliveredTCP)
			}
			if st.DeliveredFast < 4*st.DeliveredTCP {
				t.Errorf("%d messages came by the fast path and %d by TCP: the fabric did not carry the shuffle", st.DeliveredFast, st.DeliveredTCP)
			}
			nicCPU += row.NICCPUs
		})
	}
	if nicCPU <= 0 {
		t.Errorf("vnicd's CPU time was not counted (%.3f s over the runs)", nicCPU)
	}
}

// The shuffle on the fabric with every host in a process of its own,
// each attached to vnicd by itself: exactly once (measure fails else),
// carried by the fabric, vnicd's and the host processes' CPU counted.
func TestFabricShuffleProcsPerHost(t *testing.T) {
	o, fast, places := mustParse(t, []string{"-vnicd", casestudytest.Vnicd(t), "-fast", "fabric", "-procs", "per-host", "-place", "none", "-transport", "bi", "-hosts", "3", "-rows", "30000"})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tabs := make([]*Table, o.hosts)
	for i := range tabs {
		tabs[i] = GenTable(i, o.rows[0], tableSeed)
	}
	row, st, err := measure(ctx, o, places, fast, "bi", tabs, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f MB in %.3f s; sent %d, fast %d, TCP %d; host %.3f, NIC %.3f CPU-s", row.NetMB, row.Seconds, st.Sent, st.DeliveredFast, st.DeliveredTCP, row.CPUs, row.NICCPUs)
	if st.Sent == 0 || st.DeliveredFast+st.DeliveredTCP != st.Sent || st.DeliveredFast < 4*st.DeliveredTCP {
		t.Errorf("sent %d, delivered fast %d + TCP %d: the fabric did not carry the shuffle", st.Sent, st.DeliveredFast, st.DeliveredTCP)
	}
	if row.CPUs <= 0 || row.NICCPUs <= 0 {
		t.Errorf("CPU-s not all counted: host %.3f, NIC %.3f", row.CPUs, row.NICCPUs)
	}
}
