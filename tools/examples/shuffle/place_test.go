package main

import (
	"slices"
	"testing"
)

// TestPlacementFlags: every transport runs on the host CPUs, tcp-both on
// the host and NIC CPUs, and "none" pins nothing; bad placements are
// refused with the flag named.
func TestPlacementFlags(t *testing.T) {
	o, err := parseFlags([]string{"-transport", "bi,tcp,tcp-both", "-nic-pids", "10,11"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.NICPids, []int{10, 11}) {
		t.Errorf("nic pids %v", o.NICPids)
	}
	for tr, want := range map[string][]int{"bi": {1}, "tcp": {1}, "tcp-both": {0, 1}} {
		if got := o.HostCPUs(tr); !slices.Equal(got, want) {
			t.Errorf("%s runs on %v, want %v", tr, got, want)
		}
	}
	o, err = parseFlags([]string{"-place", "none"})
	if err != nil || o.HostCPUs("tcp-both") != nil {
		t.Errorf("-place none: %v, %v", o.HostCPUs("tcp-both"), err)
	}
	if _, err := parseFlags([]string{"-place", "host=0,nic=0"}); err == nil {
		t.Error("-place host=0,nic=0 was taken")
	}
}
