package main

import (
	"encoding/csv"
	"os"
	"slices"
	"strings"
	"testing"
)

const benchOut = `goos: linux
goarch: amd64
pkg: github.com/vnic/vnic/nic
BenchmarkCoreSide/low/privring-2         	   20000	     50012 ns/op	       931.0 core-ns/pkt	         3.500 pkts/poll
BenchmarkCoreSide/low/shring-2           	   20000	     50010 ns/op	      1030 core-ns/pkt	         4.000 pkts/poll
BenchmarkCoreSide/low/rxbisect-2         	   20000	     50020 ns/op	      1832 core-ns/pkt	         1.900 pkts/poll
BenchmarkCoreSide/medium/privring-2      	   20000	      5001 ns/op	       922.0 core-ns/pkt	         1.900 pkts/poll
BenchmarkCoreSide/medium/shring-2        	   20000	      5002 ns/op	       731.0 core-ns/pkt	         2.200 pkts/poll
BenchmarkCoreSide/medium/rxbisect-2      	   20000	      5003 ns/op	       884.0 core-ns/pkt	         2.100 pkts/poll
PASS
`

func TestParseAndReport(t *testing.T) {
	got, err := parse([]byte(benchOut))
	if err != nil {
		t.Fatal(err)
	}
	if s := got["low/shring"]; s.ns != 1030 || s.perPoll != 4 {
		t.Fatalf("low/shring parsed as %+v", s)
	}
	if _, err := parse([]byte(strings.ReplaceAll(benchOut, "medium/rxbisect", "medium/other"))); err == nil {
		t.Fatal("a missing variant was not reported")
	}
	// Two runs: the second with every figure doubled except shring's, so
	// shring's paired ratio halves in it.
	second := map[string]sample{}
	for k, s := range got {
		if !strings.HasSuffix(k, "/shring") {
			s.ns *= 2
		}
		second[k] = s
	}
	samples := map[string][]sample{}
	for k := range got {
		samples[k] = []sample{got[k], second[k], got[k]}
	}
	out := t.TempDir() + "/cs"
	if err := report(out, samples, []string{"1.0 1.0 1.0", "1.0 1.0 1.0", "2.0 1.0 1.0"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(recs[0], header) || len(recs) != 7 {
		t.Fatalf("CSV %v", recs)
	}
	for _, r := range recs[1:] {
		if r[0] == "low" && r[2] == "shring" {
			// ratios 1030/931 (twice) and 1030/1862: median 1030/931.
			if r[8] != "1.106" || r[9] != "0.553" || r[4] != "1030.0" {
				t.Fatalf("low/shring row %v", r)
			}
		}
	}
	for _, ext := range []string{".svg", ".png"} {
		if st, err := os.Stat(out + ext); err != nil || st.Size() == 0 {
			t.Fatalf("%s not written: %v", ext, err)
		}
	}
}
