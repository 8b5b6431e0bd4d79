package testutil_test

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite docs/knobs.md's table from testutil.Knobs")

const (
	knobsDoc   = "../../docs/knobs.md"
	knobsBegin = "<!-- knobs:begin -->\n"
	knobsEnd   = "<!-- knobs:end -->"
)

// The table in docs/knobs.md is the one KnobsTable renders from the struct.
func TestKnobsDoc(t *testing.T) {
	b, err := os.ReadFile(knobsDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, knobsBegin), strings.Index(doc, knobsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q section", knobsDoc, knobsBegin, knobsEnd)
	}
	want := testutil.KnobsTable()
	if got := doc[i+len(knobsBegin) : j]; got != want {
		if *update {
			if err := os.WriteFile(knobsDoc, []byte(doc[:i+len(knobsBegin)]+want+doc[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("%s's table differs from testutil.Knobs; run go test ./internal/testutil -run TestKnobsDoc -update\nwant:\n%s", knobsDoc, want)
	}
}

// Every BICH_*, VNIC_* and VNICCTL_* variable named in the module's Go
// files is a knob or listed as a child process's variable, so that
// docs/knobs.md names every one.
func TestKnobsCoverEveryVariable(t *testing.T) {
	known := map[string]bool{}
	for _, line := range strings.Split(testutil.KnobsTable(), "\n") {
		if m := regexp.MustCompile("^\\| `([A-Z0-9_]+)`").FindStringSubmatch(line); m != nil {
			known[m[1]] = true
		}
	}
	re := regexp.MustCompile(`"((?:BICH|VNIC|VNICCTL)_[A-Z0-9_]+)"`)
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if !known[m[1]] {
				t.Errorf("%s names %s, which is neither a field of testutil.Knobs nor in testutil.ChildEnv", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestParseKnobs(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	k, err := testutil.ParseKnobs(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if k.BenchFrames != 1_000_000 || k.BichAppCPU != -1 || !k.BichFig16 || k.BenchXskRing != 0 || k.Soak || k.IsSet("VNIC_BENCH_FRAMES") {
		t.Fatalf("defaults: %+v", k)
	}
	k, err = testutil.ParseKnobs(env(map[string]string{"VNIC_BENCH_FRAMES": "300_000", "BICH_FIG16": "0", "VNIC_SOAK": "1",
		"VNIC_SOAK_DURATION": "10m", "VNIC_BENCH_XSK_RING": "8192", "BICH_VARIANTS": "bichannel,tcp", "VNIC_BENCH_REPS": ""}))
	if err != nil {
		t.Fatal(err)
	}
	if k.BenchFrames != 300000 || k.BichFig16 || !k.Soak || k.SoakDuration != 10*time.Minute || k.BenchXskRing != 8192 ||
		k.BichVariants != "bichannel,tcp" || k.BenchReps != 6 || !k.IsSet("VNIC_BENCH_FRAMES") || k.IsSet("VNIC_BENCH_REPS") {
		t.Fatalf("set: %+v", k)
	}
	for name, val := range map[string]string{
		"VNIC_BENCH_FRAMES":    "many", // not an integer
		"VNIC_BENCH_REPS":      "0",    // below its minimum
		"VNIC_BENCH_QUEUES":    "9",    // above its maximum
		"VNIC_BENCH_XSK_RING":  "1000", // not a power of two
		"VNIC_SOAK":            "yes",  // not a boolean
		"VNIC_SOAK_DURATION":   "-1s",  // not above zero
		"VNIC_BENCH_BUDGET_MS": "11",
	} {
		_, err := testutil.ParseKnobs(env(map[string]string{name: val}))
		if err == nil || !strings.Contains(err.Error(), name+"=\""+val+"\"") {
			t.Errorf("%s=%q: %v, want an error naming the variable and the value", name, val, err)
		}
	}
	if err := k.Set("BICH_APP_CPU", "1"); err != nil || k.BichAppCPU != 1 || k.IsSet("BICH_APP_CPU") {
		t.Fatalf("Set: %v, %+v", err, k)
	}
	if err := k.Set("BICH_"+"NO_SUCH", "1"); err == nil {
		t.Fatal("Set of an unknown knob succeeded")
	}
}
