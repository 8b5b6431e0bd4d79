package numa

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// DefaultSysfsRoot is where Linux publishes the NUMA nodes.
const DefaultSysfsRoot = "/sys/devices/system/node"

// Distances as the kernel reports them (ACPI SLIT convention).
const (
	LocalDistance  = 10 // a node to itself
	RemoteDistance = 20 // one hop away in a Synthetic topology
)

// maxCPU bounds the CPU numbers accepted from a cpulist, so that a corrupt
// file cannot make us allocate without limit. Linux's NR_CPUS is at most 8192.
const maxCPU = 1 << 16

// Topology is the machine's NUMA layout.
type Topology struct {
	// Nodes sorted by kernel node ID. A node may have no CPUs (memory-only).
	Nodes []Node
	// Distance[i][j] is the relative access cost from node index i to node
	// index j (10 = local), as in /sys/devices/system/node/node<i>/distance.
	Distance [][]int
}

// Node is one NUMA node.
type Node struct {
	ID   int   // kernel node ID (the N in nodeN)
	CPUs []int // sorted CPU numbers
}

// FromSysfs reads the NUMA topology from root, a directory laid out like
// /sys/devices/system/node (nodeN/cpulist and nodeN/distance). root ""
// means DefaultSysfsRoot.
//
// With the default root only, a missing folder or one without nodeN entries
// (a kernel built without CONFIG_NUMA, or a container hiding /sys) is not an
// error: the result is one node with ID 0 holding CPUs 0..runtime.NumCPU()-1
// and distance 10. runtime.NumCPU counts the CPUs in this process's affinity
// mask, so under taskset the CPU numbers may not be the ones actually usable.
// An explicit root that does not exist is an error wrapping fs.ErrNotExist.
func FromSysfs(root string) (*Topology, error) {
	if root == "" {
		return fromSysfs(DefaultSysfsRoot, true)
	}
	return fromSysfs(root, false)
}

func fromSysfs(root string, fallback bool) (*Topology, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		if fallback && errors.Is(err, fs.ErrNotExist) {
			return singleNode(runtime.NumCPU()), nil
		}
		return nil, fmt.Errorf("numa: read topology: %w (pass the sysfs node directory, normally %s)", err, DefaultSysfsRoot)
	}
	var ids []int
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), "node")
		if !ok || name == "" {
			continue
		}
		id, err := strconv.Atoi(name)
		if err != nil || id < 0 || strconv.Itoa(id) != name {
			continue // not nodeN
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		if fallback {
			return singleNode(runtime.NumCPU()), nil
		}
		return nil, fmt.Errorf("numa: read topology: no node<N> entries in %s; pass the sysfs node directory, normally %s", root, DefaultSysfsRoot)
	}
	slices.Sort(ids)

	t := &Topology{Nodes: make([]Node, len(ids)), Distance: make([][]int, len(ids))}
	owner := make(map[int]int) // cpu -> node ID, to catch a CPU listed twice
	for i, id := range ids {
		dir := filepath.Join(root, "node"+strconv.Itoa(id))
		b, err := os.ReadFile(filepath.Join(dir, "cpulist"))
		if err != nil {
			return nil, fmt.Errorf("numa: read topology: %w", err)
		}
		cpus, err := ParseCPUList(string(b))
		if err != nil {
			return nil, fmt.Errorf("numa: read topology: %s: %w", filepath.Join(dir, "cpulist"), err)
		}
		for _, c := range cpus {
			if prev, dup := owner[c]; dup {
				return nil, fmt.Errorf("numa: read topology: CPU %d is listed by node%d and node%d; the sysfs tree at %s is inconsistent", c, prev, id, root)
			}
			owner[c] = id
		}
		t.Nodes[i] = Node{ID: id, CPUs: cpus}

		p := filepath.Join(dir, "distance")
		b, err = os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("numa: read topology: %w", err)
		}
		row, err := parseDistance(string(b), len(ids))
		if err != nil {
			return nil, fmt.Errorf("numa: read topology: %s: %w", p, err)
		}
		t.Distance[i] = row
	}
	return t, nil
}

func singleNode(ncpu int) *Topology {
	cpus := make([]int, ncpu)
	for i := range cpus {
		cpus[i] = i
	}
	return &Topology{
		Nodes:    []Node{{ID: 0, CPUs: cpus}},
		Distance: [][]int{{LocalDistance}},
	}
}

func parseDistance(s string, n int) ([]int, error) {
	f := strings.Fields(s)
	if len(f) != n {
		return nil, fmt.Errorf("has %d distances for %d nodes; the node folders and distance rows disagree (was a node hot-added or removed while reading?)", len(f), n)
	}
	row := make([]int, n)
	for i, v := range f {
		d, err := strconv.Atoi(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("distance %q is not a positive integer", v)
		}
		row[i] = d
	}
	return row, nil
}

// ParseCPUList parses the Linux cpulist format ("0-3,8,10-11", as in
// /sys/devices/system/node/node0/cpulist or /sys/devices/system/cpu/online).
// Surrounding white space is ignored and an empty list is valid (a node
// without CPUs). The result is sorted and without duplicates.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseCPU(lo)
		if err != nil {
			return nil, fmt.Errorf("parse cpulist %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = parseCPU(hi); err != nil {
				return nil, fmt.Errorf("parse cpulist %q: %w", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("parse cpulist %q: range %s is reversed; write it low-high", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

func parseCPU(s string) (int, error) {
	c, err := strconv.Atoi(s)
	if err != nil || c < 0 {
		return 0, fmt.Errorf("%q is not a CPU number; want forms like 0-3,8", s)
	}
	if c >= maxCPU {
		return 0, fmt.Errorf("CPU %d is beyond the supported %d", c, maxCPU-1)
	}
	return c, nil
}

// Synthetic returns a regular topology of nodes nodes with coresPerNode CPUs
// each, numbered consecutively (node 0 has CPUs 0..coresPerNode-1). The
// distance between nodes i and j is 10 + 10·|i−j|: 10 local, 20 for
// neighbours (the usual two-socket value), growing linearly along a chain so
// that with more than two nodes "nearest first" is meaningful.
//
// It panics if nodes < 1 or coresPerNode < 0.
func Synthetic(nodes, coresPerNode int) *Topology {
	if nodes < 1 || coresPerNode < 0 {
		panic(fmt.Sprintf("numa: Synthetic(%d, %d): need at least one node and no negative core count", nodes, coresPerNode))
	}
	t := &Topology{Nodes: make([]Node, nodes), Distance: make([][]int, nodes)}
	for i := range nodes {
		cpus := make([]int, coresPerNode)
		for c := range cpus {
			cpus[c] = i*coresPerNode + c
		}
		t.Nodes[i] = Node{ID: i, CPUs: cpus}
		t.Distance[i] = make([]int, nodes)
		for j := range nodes {
			d := i - j
			if d < 0 {
				d = -d
			}
			t.Distance[i][j] = LocalDistance + (RemoteDistance-LocalDistance)*d
		}
	}
	return t
}

// NodeOf returns the index into t.Nodes of the node holding cpu, or -1 if no
// node lists it.
func (t *Topology) NodeOf(cpu int) int {
	for i, n := range t.Nodes {
		if slices.Contains(n.CPUs, cpu) {
			return i
		}
	}
	return -1
}

// NumCPUs returns the number of CPUs over all nodes.
func (t *Topology) NumCPUs() int {
	n := 0
	for _, nd := range t.Nodes {
		n += len(nd.CPUs)
	}
	return n
}
