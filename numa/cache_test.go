package numa

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCPUCaches(t *testing.T) {
	root := t.TempDir()
	for i, c := range []struct{ level, typ, size, shared string }{
		{"1", "Data", "48K", "0"}, {"1", "Instruction", "32K", "0"}, {"2", "Unified", "512K", "0"}, {"3", "Unified", "32768K", "0-7"},
	} {
		d := filepath.Join(root, "cpu0", "cache", "index"+string(rune('0'+i)))
		os.MkdirAll(d, 0o755)
		for f, v := range map[string]string{"level": c.level, "type": c.typ, "size": c.size, "shared_cpu_list": c.shared} {
			os.WriteFile(filepath.Join(d, f), []byte(v+"\n"), 0o644)
		}
	}
	cs, err := CPUCaches(root, 0)
	if err != nil || len(cs) != 4 {
		t.Fatalf("%v %v", cs, err)
	}
	llc, ok := LastLevel(cs)
	if !ok || llc.Level != 3 || llc.Size != 32<<20 || len(llc.SharedCPUs) != 8 {
		t.Fatalf("llc %+v", llc)
	}
	if _, err := CPUCaches(root, 1); err == nil {
		t.Fatal("a CPU without a cache directory gave no error")
	}
}

func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{"32768K": 32 << 20, "1024 KB": 1 << 20, "32M": 32 << 20, "512": 512, " 2 MiB": 2 << 20} {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("%q: %d %v", s, got, err)
		}
	}
	if _, err := ParseSize("lots"); err == nil {
		t.Error("bad size accepted")
	}
}
