package main

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/tools/examples/internal/casestudy"
)

// A small cluster with every node in a process of its own: the updates
// are answered, every replica matches the acknowledged log, the node
// processes' CPU is the host's and the load client's is counted apart.
func TestProcsPerHost(t *testing.T) {
	o, fast, places := mustParse(t, []string{"-procs", "per-host", "-place", "none", "-transport", "tcp,hot", "-rates", "2000",
		"-duration", "400ms", "-conns", "2", "-keys", "200", "-check"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tr := range o.Transports {
		row, err := step(ctx, o, places, fast, tr, 2000, 0)
		if err != nil {
			t.Fatalf("%s: %v", tr, err)
		}
		t.Logf("%s: %d answered; host %.3f CPU-s, client %.3f CPU-s; %s", tr, row.Answered, row.CPUs, row.ClientCPUs, row.Notes)
		if !row.Verified {
			t.Errorf("%s: the replicas' check did not run", tr)
		}
		if row.Answered == 0 || row.Failed != 0 {
			t.Errorf("%s: %d updates answered, %d failed", tr, row.Answered, row.Failed)
		}
		if row.CPUs <= 0 || row.HostPerM <= 0 {
			t.Errorf("%s: the node processes' CPU was not counted (%.3f s)", tr, row.CPUs)
		}
		if row.ClientCPUs <= 0 {
			t.Errorf("%s: the load client's CPU was not counted apart (%.3f s)", tr, row.ClientCPUs)
		}
		if tr == "hot" && row.DeliveredFast == 0 {
			t.Errorf("hot: no replication message came by the fast path: the node processes' counters were not read")
		}
	}
}

// -kill with -procs per-host kills secondary 2's process half-way: the
// primary goes on with its quorum and the survivors match the log.
func TestProcsPerHostKill(t *testing.T) {
	o, fast, places := mustParse(t, []string{"-procs", "per-host", "-place", "none", "-transport", "tcp", "-rates", "2000",
		"-duration", "400ms", "-conns", "2", "-keys", "200", "-kill"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	row, err := step(ctx, o, places, fast, "tcp", 2000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !row.Killed || !row.Verified || row.Answered == 0 || row.Failed != 0 {
		t.Errorf("killed %v, verified %v, %d answered, %d failed", row.Killed, row.Verified, row.Answered, row.Failed)
	}
}

// procCluster.Kill ends the secondary's process for real: its pid is
// gone, the others still run and answer.
func TestProcsKillIsReal(t *testing.T) {
	cfg := ClusterConfig{Shards: 1, ClusterConfig: casestudy.ClusterConfig{Places: casestudy.Loopback(3), Transport: "tcp"}}
	pc, err := startProcs(cfg, "", nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	pid := pc.nodes[2].Pid()
	pc.Kill(2)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("after Kill, signalling pid %d gives %v, want ESRCH (no such process)", pid, err)
	}
	if err := pc.CatchUp(time.Second); err != nil {
		t.Errorf("the survivors do not answer: %v", err)
	}
	if got := pc.live(); len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Errorf("live nodes %v, want [0 1]", got)
	}
	if err := pc.Close(); err != nil {
		t.Errorf("closing the survivors: %v", err)
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
