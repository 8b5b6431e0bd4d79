//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/vnic/vnic/internal/testbed"
	"github.com/vnic/vnic/internal/testutil"
)

// TestIntegrationShuffleMsgAboveMTU: -msg 8900 on a testbed of MTU 1500 is
// refused with the testbed command that makes it fit, instead of running
// with every message fragmented; a message that fits one frame passes.
func TestIntegrationShuffleMsgAboveMTU(t *testing.T) {
	testutil.RequireNetAdmin(t)
	cfg := testbed.Config{Prefix: fmt.Sprintf("sm%d", os.Getpid()%10000), Hosts: 2, Queues: 1, MTU: 1500}
	testutil.Testbed(t, cfg)
	o, err := parseFlags([]string{"-testbed", cfg.Prefix, "-hosts", "2", "-msg", "8900", "-rows", "100"})
	if err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), o, io.Discard)
	want := fmt.Sprintf("shuffle: -msg 8900 needs an MTU of 8928 or more, and testbed %s has MTU 1500: build it with vnicctl testbed up --hosts 2 --prefix %s --mtu 9000, or give -msg 1472 or less", cfg.Prefix, cfg.Prefix)
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	if strings.Count(err.Error(), "\n") != 0 {
		t.Errorf("not one line: %q", err)
	}
	o.msg = 1472
	if err := msgFitsTestbed(o); err != nil {
		t.Errorf("-msg 1472 at MTU 1500: %v", err)
	}
}
