package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vnic/vnic/nic/sim"
)

func runApp(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := newApp(&out, &errOut).Run(append([]string{"vnicsim"}, args...))
	return out.String(), err
}

// TestAllExperiments runs every experiment, briefly, and checks that each
// wrote a CSV with a row per run and a plot, and printed a summary line.
func TestAllExperiments(t *testing.T) {
	dir := t.TempDir()
	out, err := runApp(t, "-exp", "all", "-out", dir, "-scale", "0.003", "-seed", "3")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(sim.Experiments()) {
		t.Fatalf("want %d summary lines, got %q", len(sim.Experiments()), out)
	}
	for i, e := range sim.Experiments() {
		if !strings.HasPrefix(lines[i], e.Name+": ") {
			t.Errorf("summary line %d: %q", i, lines[i])
		}
		f, err := os.Open(filepath.Join(dir, e.Name+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) < 2 || strings.Join(recs[0], ",") != strings.Join(sim.CSVHeader(), ",") {
			t.Fatalf("%s.csv: %d records, header %v", e.Name, len(recs), recs[0])
		}
		svg, err := os.ReadFile(filepath.Join(dir, e.Name+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("rxbisect")) {
			t.Fatalf("%s.svg is not a plot with a legend", e.Name)
		}
	}
}

func TestPNG(t *testing.T) {
	dir := t.TempDir()
	if _, err := runApp(t, "-exp", "c", "-out", dir, "-scale", "0.003", "-format", "png"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "c.png"))
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("c.png: %v", err)
	}
}

func TestBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-exp", "z", "-out", dir},
		{"-scale", "0", "-out", dir},
		{"-format", "gif", "-out", dir},
		{"-out", dir, "extra"},
	} {
		if _, err := runApp(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
