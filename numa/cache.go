package numa

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultCPURoot is where Linux publishes the CPUs and their caches.
const DefaultCPURoot = "/sys/devices/system/cpu"

// Cache is one cache of a CPU, as sysfs describes it.
type Cache struct {
	Level      int
	Type       string // Data, Instruction or Unified
	Size       int64  // bytes
	SharedCPUs []int  // the CPUs sharing it
}

// CPUCaches reads the caches of cpu from root/cpu<N>/cache/index* (root ""
// means DefaultCPURoot). Some VMs publish no cache directory: the error
// then says so.
func CPUCaches(root string, cpu int) ([]Cache, error) {
	if root == "" {
		root = DefaultCPURoot
	}
	dir := filepath.Join(root, fmt.Sprintf("cpu%d", cpu), "cache")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("numa: read caches: %w (this kernel or VM does not publish the cache hierarchy)", err)
	}
	var cs []Cache
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "index") {
			continue
		}
		read := func(f string) string {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name(), f))
			return strings.TrimSpace(string(b))
		}
		lvl, err := strconv.Atoi(read("level"))
		if err != nil {
			continue
		}
		size, err := ParseSize(read("size"))
		if err != nil {
			continue
		}
		shared, _ := ParseCPUList(read("shared_cpu_list"))
		cs = append(cs, Cache{Level: lvl, Type: read("type"), Size: size, SharedCPUs: shared})
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("numa: read caches: no readable index<N> entries in %s", dir)
	}
	return cs, nil
}

// ParseSize parses a sysfs or cpuinfo cache size: "32768K", "1024 KB",
// "32M", "512" (bytes).
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "B"), "i"))
	mul := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mul, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mul, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mul, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("numa: cache size %q: want a number of bytes with an optional K, M or G", s)
	}
	return n * mul, nil
}

// LastLevel returns the cache of the highest level among cs (Unified or
// Data), or false.
func LastLevel(cs []Cache) (Cache, bool) {
	var best Cache
	ok := false
	for _, c := range cs {
		if c.Type == "Instruction" {
			continue
		}
		if !ok || c.Level > best.Level {
			best, ok = c, true
		}
	}
	return best, ok
}

// LLC returns the size of CPU 0's last-level cache and where it came from:
// sysfs, or, when the VM publishes no cache hierarchy, /proc/cpuinfo's
// "cache size" (on x86 the kernel's largest known cache of the core, often
// the L2 on AMD: a lower bound of the LLC).
func LLC() (size int64, source string, err error) {
	if cs, err := CPUCaches("", 0); err == nil {
		if c, ok := LastLevel(cs); ok {
			return c.Size, fmt.Sprintf("sysfs L%d", c.Level), nil
		}
	}
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return 0, "", fmt.Errorf("numa: llc: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "cache size" {
			n, err := ParseSize(v)
			if err != nil {
				return 0, "", err
			}
			return n, "/proc/cpuinfo cache size (no sysfs cache hierarchy)", nil
		}
	}
	return 0, "", errors.New("numa: llc: neither sysfs nor /proc/cpuinfo gives a cache size; pass the size explicitly")
}
