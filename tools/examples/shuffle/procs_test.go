package main

import (
	"context"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel"
)

// A small shuffle with every host in a process of its own: every host
// gathers exactly the rows the tables hold for it (measure fails else),
// the bi-channel's counters come back from the host processes, and the
// host CPU is the host processes' (their getrusage, user and system).
func TestProcsPerHost(t *testing.T) {
	o, fast, places := mustParse(t, []string{"-procs", "per-host", "-place", "none", "-transport", "tcp,bi", "-hosts", "3", "-rows", "20000"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tabs := make([]*Table, o.hosts)
	for i := range tabs {
		tabs[i] = GenTable(i, o.rows[0], tableSeed)
	}
	for _, tr := range o.Transports {
		row, st, err := measure(ctx, o, places, fast, tr, tabs, 0)
		if err != nil {
			t.Fatalf("%s: %v", tr, err)
		}
		t.Logf("%s: %.1f MB in %.3f s, %.3f host CPU-s; sent %d, fast %d, TCP %d", tr, row.NetMB, row.Seconds, row.CPUs, st.Sent, st.DeliveredFast, st.DeliveredTCP)
		if row.NetMB <= 0 {
			t.Errorf("%s: nothing crossed the network", tr)
		}
		if row.CPUs <= 0 || row.CPUPerGB <= 0 {
			t.Errorf("%s: the host processes' CPU was not counted (%.3f s)", tr, row.CPUs)
		}
		if d := row.CPUs - row.UserCPUs - row.SysCPUs; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: CPU-s %.6f is not user %.6f + system %.6f", tr, row.CPUs, row.UserCPUs, row.SysCPUs)
		}
		if tr == "bi" && (st.Sent == 0 || st.DeliveredFast+st.DeliveredTCP != st.Sent) {
			t.Errorf("bi: sent %d, delivered fast %d + TCP %d: the host processes' counters", st.Sent, st.DeliveredFast, st.DeliveredTCP)
		}
	}
}

// A host process's wrong tally fails the exactly-once check: the check
// runs on what the processes report.
func TestProcsCheckCatchesLoss(t *testing.T) {
	hs := []hostTally{
		{SentTo: []Tally{{Rows: 2, Sum: 5}, {Rows: 1, Sum: 7}}, Gathered: Tally{Rows: 3, Sum: 12}, OutRows: 3},
		{SentTo: []Tally{{Rows: 1, Sum: 7}, {Rows: 2, Sum: 3}}, Gathered: Tally{Rows: 3, Sum: 10}, OutRows: 3},
	}
	var res Result
	if err := res.check(hs); err != nil || !res.ExactlyOnce {
		t.Fatalf("matching tallies: %v", err)
	}
	hs[1].Gathered.Sum++
	res = Result{}
	if err := res.check(hs); err == nil || res.ExactlyOnce {
		t.Error("a wrong checksum passed the check")
	}
}

// mustParse parses a step's flags and its places, failing the test on an
// error.
func mustParse(t *testing.T, args []string) (options, bichannel.FastMode, []Place) {
	t.Helper()
	o, err := parseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	fast, places, err := placesFor(o)
	if err != nil {
		t.Fatal(err)
	}
	return o, fast, places
}
