package numa

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"0-3,8,10-11\n", []int{0, 1, 2, 3, 8, 10, 11}},
		{"5", []int{5}},
		{"\n", nil},
		{"", nil},
		{"3,1-2,2", []int{1, 2, 3}},
	} {
		got, err := ParseCPUList(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestBadCPUList(t *testing.T) {
	for _, in := range []string{"a", "1-", "-1", "3-1", "0,,1", "1-2-3", "99999999", "0-70000"} {
		if got, err := ParseCPUList(in); err == nil {
			t.Errorf("ParseCPUList(%q) = %v, want an error", in, got)
		}
	}
}

// fakeSysfs writes a sysfs-like node tree and returns its root.
func fakeSysfs(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestFromSysfsTwoNodes(t *testing.T) {
	root := fakeSysfs(t, map[string]string{
		"online":            "0-1\n",
		"possible":          "0-1\n",
		"power/autosuspend": "",
		"node1/cpulist":     "2-3,6-7\n",
		"node1/distance":    "21 10\n",
		"node0/cpulist":     "0-1,4-5\n",
		"node0/distance":    "10 21\n",
		"node0/cpumap":      "33\n",
	})
	topo, err := FromSysfs(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Nodes) != 2 {
		t.Fatalf("got %d nodes, want 2", len(topo.Nodes))
	}
	if n := topo.Nodes[0]; n.ID != 0 || !slices.Equal(n.CPUs, []int{0, 1, 4, 5}) {
		t.Errorf("node 0 = %+v", n)
	}
	if n := topo.Nodes[1]; n.ID != 1 || !slices.Equal(n.CPUs, []int{2, 3, 6, 7}) {
		t.Errorf("node 1 = %+v", n)
	}
	if !slices.Equal(topo.Distance[0], []int{10, 21}) || !slices.Equal(topo.Distance[1], []int{21, 10}) {
		t.Errorf("distance = %v", topo.Distance)
	}
	if topo.NumCPUs() != 8 {
		t.Errorf("NumCPUs = %d, want 8", topo.NumCPUs())
	}
	for cpu, want := range map[int]int{0: 0, 5: 0, 2: 1, 7: 1, 8: -1, -1: -1} {
		if got := topo.NodeOf(cpu); got != want {
			t.Errorf("NodeOf(%d) = %d, want %d", cpu, got, want)
		}
	}
}

func TestFromSysfsSparseAndMemoryOnly(t *testing.T) {
	root := fakeSysfs(t, map[string]string{
		"node0/cpulist":  "0-1\n",
		"node0/distance": "10 20\n",
		"node2/cpulist":  "\n", // a memory-only node (CXL)
		"node2/distance": "20 10\n",
		"nodeX/cpulist":  "9\n", // not a node
	})
	topo, err := FromSysfs(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Nodes) != 2 || topo.Nodes[1].ID != 2 || len(topo.Nodes[1].CPUs) != 0 {
		t.Fatalf("nodes = %+v", topo.Nodes)
	}
	if topo.NodeOf(1) != 0 {
		t.Errorf("NodeOf(1) = %d, want index 0", topo.NodeOf(1))
	}
}

func TestBadSysfs(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"garbage cpulist":   {"node0/cpulist": "zero\n", "node0/distance": "10\n"},
		"short distance":    {"node0/cpulist": "0\n", "node0/distance": "10\n", "node1/cpulist": "1\n", "node1/distance": "20 10\n"},
		"garbage distance":  {"node0/cpulist": "0\n", "node0/distance": "ten\n"},
		"negative distance": {"node0/cpulist": "0\n", "node0/distance": "-10\n"},
		"missing distance":  {"node0/cpulist": "0\n"},
		"missing cpulist":   {"node0/distance": "10\n"},
		"cpu on two nodes":  {"node0/cpulist": "0-1\n", "node0/distance": "10 20\n", "node1/cpulist": "1-2\n", "node1/distance": "20 10\n"},
		"no nodes":          {"online": "0\n"},
	} {
		t.Run(name, func(t *testing.T) {
			topo, err := FromSysfs(fakeSysfs(t, files))
			if err == nil {
				t.Fatalf("got %+v, want an error", topo)
			}
			if !strings.HasPrefix(err.Error(), "numa: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestFromSysfsMissingRoot(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := FromSysfs(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("explicit missing root: err = %v, want fs.ErrNotExist", err)
	}
	// The default root falls back to one node when the folder is absent.
	topo, err := fromSysfs(missing, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Nodes) != 1 || len(topo.Nodes[0].CPUs) != runtime.NumCPU() ||
		topo.NodeOf(0) != 0 || !slices.Equal(topo.Distance[0], []int{10}) {
		t.Errorf("fallback = %+v", topo)
	}
}

// TestFromSysfsReal reads this machine's /sys (or the fallback on a kernel
// without NUMA); CPU 0 must be on some node.
func TestFromSysfsReal(t *testing.T) {
	topo, err := FromSysfs("")
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Nodes) == 0 {
		t.Fatal("no nodes")
	}
	if topo.NodeOf(0) < 0 {
		t.Errorf("CPU 0 is on no node: %+v", topo.Nodes)
	}
	for i, row := range topo.Distance {
		if len(row) != len(topo.Nodes) || row[i] <= 0 {
			t.Errorf("distance row %d = %v", i, row)
		}
	}
	t.Logf("nodes %+v distance %v", topo.Nodes, topo.Distance)
}

func TestSynthetic(t *testing.T) {
	topo := Synthetic(4, 3)
	if topo.NumCPUs() != 12 || topo.NodeOf(7) != 2 || topo.NodeOf(12) != -1 {
		t.Errorf("topology = %+v", topo)
	}
	want := [][]int{{10, 20, 30, 40}, {20, 10, 20, 30}, {30, 20, 10, 20}, {40, 30, 20, 10}}
	for i := range want {
		if !slices.Equal(topo.Distance[i], want[i]) {
			t.Errorf("distance row %d = %v, want %v", i, topo.Distance[i], want[i])
		}
	}
	if two := Synthetic(2, 1); two.Distance[0][1] != 20 {
		t.Errorf("two-node remote distance = %d, want 20", two.Distance[0][1])
	}
}
