package tests

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/internal/testutil"
)

// TestIntegrationPingpongAuto runs the pingpong example as two processes
// across the testbed's veth: node 1 beside vnicd with -fast auto and no
// -port, node 0 in the peer namespace on kernel UDP. A first pingpong
// already holds port 47100 on the same vnicd; node 1 must find vnicd,
// take the next port no tenant claims, attach under a name of its own,
// and the round trips must go over the fast path, not TCP.
func TestIntegrationPingpongAuto(t *testing.T) {
	b := newBed(t, 1)
	bin := testutil.MustBuild(t, "github.com/vnic/vnic/examples/pingpong")
	b.startVnicd("--no-claim-all")
	l := b.link()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	holder := exec.CommandContext(ctx, "ip", "netns", "exec", b.tb.DUT, bin, "-id", "1", "-fast", "vnic", "-port", "47100",
		"-socket", b.socket, "-ip", l.DUTIP.String(), "-listen", l.DUTIP.String()+":7201", "-peer", "0="+l.PeerIP.String()+":7200", "-duration", "40s")
	var holderOut testutil.SyncBuffer
	holder.Stdout, holder.Stderr = &holderOut, &holderOut
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer stopProcess(holder)
	for i := 0; !strings.Contains(holderOut.String(), "control on"); i++ {
		if i == 1000 {
			t.Fatalf("the first tenant did not attach:\n%s\nvnicd:\n%s", holderOut.String(), b.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}

	dut := l.DUTIP.String() + ":7101"
	peer := l.PeerIP.String() + ":7100"
	echo := exec.CommandContext(ctx, "ip", "netns", "exec", b.tb.DUT, bin, "-id", "1", "-fast", "auto", "-socket", b.socket,
		"-ip", l.DUTIP.String(), "-listen", dut, "-peer", "0="+peer, "-duration", "40s")
	var echoOut testutil.SyncBuffer
	echo.Stdout, echo.Stderr = &echoOut, &echoOut
	if err := echo.Start(); err != nil {
		t.Fatal(err)
	}
	defer stopProcess(echo)
	pinger := exec.CommandContext(ctx, "ip", "netns", "exec", l.PeerNS, bin, "-id", "0", "-fast", "udp",
		"-ip", l.PeerIP.String(), "-listen", peer, "-peer", "1="+dut, "-n", "2000", "-duration", "30s")
	out, err := pinger.CombinedOutput()
	if err != nil {
		t.Fatalf("node 0: %v\n%s\nnode 1:\n%s\nvnicd:\n%s", err, out, echoOut.String(), b.logTail())
	}
	echo.Wait()
	e := echoOut.String()
	t.Logf("node 0:\n%s\nnode 1:\n%s", out, e)
	if !strings.Contains(e, "fast path vnicd (AF_XDP)") {
		t.Fatalf("node 1 did not take vnicd's fast path:\n%s", e)
	}
	if !strings.Contains(e, "claims UDP ports 47101-47101") {
		t.Errorf("node 1 did not take the first free port after the first tenant's 47100:\n%s", e)
	}
	m := regexp.MustCompile(`(\d+) round trips`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no round trips reported:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n != 2000 {
		t.Errorf("%d round trips, want 2000", n)
	}
	fast := regexp.MustCompile(`node 0 sent: sent \d+, delivered fast (\d+) / TCP (\d+)`).FindSubmatch(out)
	if fast == nil {
		t.Fatalf("no delivery counts:\n%s", out)
	}
	nf, _ := strconv.Atoi(string(fast[1]))
	nt, _ := strconv.Atoi(string(fast[2]))
	if nf < 1900 || nt > 100 {
		t.Errorf("delivered fast %d / TCP %d: want (almost) every message over the fast path", nf, nt)
	}
	if strings.Contains(e, "WRN") {
		t.Errorf("node 1 warned on a clean run:\n%s", e)
	}
}
