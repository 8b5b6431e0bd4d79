package figure

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
)

func twoPanels() []Panel {
	s := []Series{{Label: "a", X: []float64{1, 2, 3}, Y: []float64{10, 40, 70}}, {Label: "b"}}
	return []Panel{
		{Title: "pct", Series: s, ZeroY: true, YMax: 100, YStep: 5},
		{Title: "log", Series: s, LogX: true, LogY: true, XTicks: []float64{1, 2, 3}},
	}
}

// YMax ends the y axis and YStep puts a labelled tick at each multiple.
func TestYMaxYStep(t *testing.T) {
	pl, err := twoPanels()[0].Build()
	if err != nil {
		t.Fatal(err)
	}
	if pl.Y.Min != 0 || pl.Y.Max != 100 {
		t.Fatalf("y axis %g..%g, want 0..100", pl.Y.Min, pl.Y.Max)
	}
	var vals []float64
	for _, tk := range pl.Y.Tick.Marker.Ticks(pl.Y.Min, pl.Y.Max) {
		vals = append(vals, tk.Value)
		if tk.Label == "" {
			t.Errorf("tick %g has no label", tk.Value)
		}
	}
	if len(vals) != 21 || vals[0] != 0 || vals[20] != 100 || vals[1] != 5 {
		t.Fatalf("ticks %v, want 0, 5, ..., 100", vals)
	}
	if _, err := (Panel{Series: []Series{{X: []float64{1}}}}).Build(); err == nil {
		t.Fatal("a series with 1 x and 0 y values was drawn")
	}
}

// SaveFile writes the one format its path names; SaveGrid both.
func TestSave(t *testing.T) {
	dir := t.TempDir()
	plots, err := BuildAll(twoPanels()...)
	if err != nil {
		t.Fatal(err)
	}
	w, h := 6*vg.Centimeter, 5*vg.Centimeter
	if err := SaveFile(filepath.Join(dir, "one.png"), w, h, 2, plots...); err != nil {
		t.Fatal(err)
	}
	if err := SaveFile(filepath.Join(dir, "one.svg"), w, h, 1, plots...); err != nil {
		t.Fatal(err)
	}
	if err := SaveGrid(filepath.Join(dir, "both"), w, h, 2, plots...); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name  string
		magic string
	}{{"one.png", "\x89PNG"}, {"one.svg", "<svg"}, {"both.png", "\x89PNG"}, {"both.svg", "<svg"}} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b[:min(len(b), 512)], []byte(f.magic)) {
			t.Errorf("%s does not start as a %q file", f.name, f.magic)
		}
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"both.png", "both.svg", "one.png", "one.svg"}; !slices.Equal(names, want) {
		t.Errorf("files %v, want %v", names, want)
	}
	if err := SaveFile(filepath.Join(dir, "none.svg"), w, h, 1); err == nil {
		t.Error("SaveFile drew no plots without an error")
	}
}

// TestLogTicks: less than a decade gets labels at 1, 2 and 5 × 10^k; many
// decades get powers of ten only; a bad range gets none.
func TestLogTicks(t *testing.T) {
	labels := func(lo, hi float64) (out []string) {
		for _, tk := range (LogTicks{}).Ticks(lo, hi) {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	if got := strings.Join(labels(150, 900), " "); got != "200 500" {
		t.Errorf("150..900: %q", got)
	}
	if got := strings.Join(labels(1, 1e6), " "); got != "1 10 100 1000 10000 100000 1e+06" {
		t.Errorf("1..1e6: %q", got)
	}
	if got := labels(0, 10); got != nil {
		t.Errorf("0..10: %q", got)
	}
}
