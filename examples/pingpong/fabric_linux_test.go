//go:build linux

package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/nic/fabric"
)

// -fast fabric runs both nodes in this process as hosts 198.18.0.1 and
// 198.18.0.2 of a fabric vnicd: the round trips happen, the output has
// their count and p50/p99, and the fabric's ledger of both hosts, whose
// frames the fabric delivered (every message by the fast path), each
// line consistent (sent = delivered + drops) and pointing at vnicctl
// fabric for the rest.
func TestFabricMode(t *testing.T) {
	d, fab := testutil.StartFabricDaemon(t, fabric.Config{})
	sock := d.Socket
	var out, logOut testutil.SyncBuffer
	o := testOptions(&out, &logOut)
	o.fast, o.ip, o.socket, o.attachTimeout = "fabric", "", sock, o.duration
	if err := run(o); err != nil {
		t.Fatalf("run: %v\noutput:\n%s\nlog:\n%s", err, out.String(), logOut.String())
	}
	res := out.String()
	t.Logf("output:\n%s", res)
	for _, want := range []string{
		"two nodes on 198.18.0.1 and 198.18.0.2, fast path vnicd's fabric",
		"300 round trips", "p50=", "p99=",
		"fabric ledger of vnicd at " + sock,
		"vnicctl fabric --all --socket " + sock,
	} {
		if !strings.Contains(res, want) {
			t.Errorf("the output has no %q", want)
		}
	}
	if !strings.Contains(logOut.String(), "this node is host 198.18.0.1") {
		t.Errorf("the log does not say which host node 0 is:\n%s", logOut.String())
	}
	line := regexp.MustCompile(`(?m)^  (198\.18\.0\.[12]) \(node ([01])\): sent (\d+), delivered (\d+), received (\d+), (no drops|dropped .*)$`)
	rows := line.FindAllStringSubmatch(res, -1)
	if len(rows) != 2 {
		t.Fatalf("%d ledger lines, want one per host:\n%s", len(rows), res)
	}
	var deliveredFast = regexp.MustCompile(`delivered fast (\d+)`).FindAllStringSubmatch(res, -1)
	if len(deliveredFast) != 2 {
		t.Fatalf("no stats lines of both nodes:\n%s", res)
	}
	for i, r := range rows {
		if want := "198.18.0." + strconv.Itoa(i+1); r[1] != want || r[2] != strconv.Itoa(i) {
			t.Errorf("ledger line %d is host %s node %s, want %s node %d", i, r[1], r[2], want, i)
		}
		sent, _ := strconv.ParseUint(r[3], 10, 64)
		delivered, _ := strconv.ParseUint(r[4], 10, 64)
		received, _ := strconv.ParseUint(r[5], 10, 64)
		// Node 0's messages are delivered fast to node 1, and node 1's
		// echoes to node 0: the fabric delivered at least those.
		fastAtPeer, _ := strconv.ParseUint(deliveredFast[1-i][1], 10, 64)
		if delivered == 0 || delivered < fastAtPeer {
			t.Errorf("host %s: the fabric delivered %d frames, want at least the %d messages the peer got by the fast path", r[1], delivered, fastAtPeer)
		}
		if received == 0 {
			t.Errorf("host %s received nothing over the fabric", r[1])
		}
		if r[6] == "no drops" && sent != delivered {
			t.Errorf("host %s: sent %d != delivered %d with no drops", r[1], sent, delivered)
		}
	}
	if n := fab.Totals()[fabric.Delivered]; n == 0 {
		t.Errorf("the fabric's totals delivered nothing")
	}
}

// -fast vnic against a fabric vnicd says to use -fast fabric instead of
// the attach's refusal.
func TestVNICOnFabricSaysFabric(t *testing.T) {
	d, _ := testutil.StartFabricDaemon(t, fabric.Config{})
	sock := d.Socket
	var out, logOut testutil.SyncBuffer
	o := testOptions(&out, &logOut)
	o.fast, o.socket = "vnic", sock
	err := run(o)
	if err == nil || !strings.Contains(err.Error(), "use -fast fabric") {
		t.Fatalf("run: %v, want advice to use -fast fabric", err)
	}
}
