package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Figure 14 from a CSV that -csv wrote, including a sweep of one table
// size (a log axis over one size has no range: it once panicked).
func TestPlotSweepFromCSV(t *testing.T) {
	dir := t.TempDir()
	rows := []Row{{Transport: "bi", Hosts: 3, Workers: 2, Rows: 1000, NetMB: 1, Seconds: 0.1, GBps: 0.5, CPUs: 0.1, CPUPerGB: 2, Msg: 1400, HostCPUs: "1"},
		{Transport: "tcp", Hosts: 3, Workers: 2, Rows: 1000, NetMB: 1, Seconds: 0.2, GBps: 0.25, CPUs: 0.1, CPUPerGB: 4, Msg: 1400, HostCPUs: "1"}}
	csv := filepath.Join(dir, "f.csv")
	if err := writeCSV(csv, rows); err != nil {
		t.Fatal(err)
	}
	back, err := readCSV(csv)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0].GBps != 0.5 || back[1].CPUPerGB != 4 || back[0].Rows != 1000 || back[1].Transport != "tcp" {
		t.Fatalf("read back %+v", back)
	}
	png := filepath.Join(dir, "f.png")
	if err := plotSweep(back, png); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(png); err != nil || st.Size() == 0 {
		t.Fatalf("no plot: %v", err)
	}
}
