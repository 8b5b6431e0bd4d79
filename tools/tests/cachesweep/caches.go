package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/vnic/vnic/numa"
)

// cacheReport is what this machine says about its caches, from every
// source we can read, and the sizes the sweep marks on its plots.
type cacheReport struct {
	Lines  []string // one finding per line, for the machine file and stdout
	L2, L3 int64    // the boundaries drawn on the plots, bytes
}

// readCaches reads sysfs, /proc/cpuinfo and CPUID. l3 is the L3 size to
// draw when no source gives a credible one (the hypervisor may hide or
// invent it).
func readCaches(l3 int64) cacheReport {
	var r cacheReport
	add := func(format string, a ...any) { r.Lines = append(r.Lines, fmt.Sprintf(format, a...)) }
	var sysL2, sysL3 int64
	if cs, err := numa.CPUCaches("", 0); err != nil {
		add("sysfs: %v", err)
	} else {
		for _, c := range cs {
			add("sysfs: level %d %s %d KiB, shared by CPUs %v", c.Level, c.Type, c.Size>>10, c.SharedCPUs)
			switch {
			case c.Type == "Instruction":
			case c.Level == 2:
				sysL2 = c.Size
			case c.Level == 3:
				sysL3 = c.Size
			}
		}
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && (strings.TrimSpace(k) == "cache size" || strings.TrimSpace(k) == "model name") {
				add("/proc/cpuinfo %s: %s", strings.TrimSpace(k), strings.TrimSpace(v))
			}
			if strings.TrimSpace(k) == "processor" && strings.TrimSpace(v) == "1" {
				break // cpu0 is enough
			}
		}
		f.Close()
	}
	var cpuL2, cpuL3 int64
	if haveCPUID {
		_, b, c, d := cpuid(0, 0)
		vendor := string(le(b)) + string(le(d)) + string(le(c))
		_, b, c, d = cpuid(0x40000000, 0)
		hv := strings.TrimRight(string(le(b))+string(le(c))+string(le(d)), "\x00 ")
		a, _, _, _ := cpuid(1, 0)
		fam := (a>>8)&0xf + (a>>20)&0xff
		model := (a>>4)&0xf | (a>>16)&0xf<<4
		add("CPUID 0: vendor %s, family 0x%x model 0x%x; leaf 0x40000000 hypervisor %q", vendor, fam, model, hv)
		maxExt, _, _, _ := cpuid(0x80000000, 0)
		if maxExt >= 0x80000006 {
			_, _, c, _ = cpuid(0x80000005, 0)
			add("CPUID 0x80000005: L1d %d KiB", c>>24)
			_, _, c, d = cpuid(0x80000006, 0)
			cpuL2 = int64(c>>16) << 10
			cpuL3 = int64(d>>18) * 512 << 10
			add("CPUID 0x80000006: L2 %d KiB per core (line %d B), L3 %d KiB", c>>16, c&0xff, (d>>18)*512)
		}
		if maxExt >= 0x8000001D {
			n := 0
			for i := uint32(0); i < 8; i++ {
				a, b, c, _ := cpuid(0x8000001D, i)
				if a&0x1f == 0 {
					break
				}
				n++
				ways, parts, line, sets := b>>22+1, (b>>12)&0x3ff+1, b&0xfff+1, c+1
				add("CPUID 0x8000001D.%d: level %d type %d, %d KiB, %d ways, shared by %d threads",
					i, (a>>5)&7, a&0x1f, ways*parts*line*sets>>10, ways, (a>>14)&0xfff+1)
			}
			if n == 0 {
				add("CPUID 0x8000001D (AMD cache topology): empty (the hypervisor zeroes it)")
			}
		}
	}
	r.L2, r.L3 = firstPositive(sysL2, cpuL2), firstPositive(sysL3, l3)
	if sysL3 == 0 && cpuL3 > 0 && cpuL3 != l3 {
		add("CPUID's L3 (%d MiB) is not credible for one CCD; the plots mark %d MiB (-l3)", cpuL3>>20, l3>>20)
	}
	add("plot marks: L2 %d KiB, L3 %d MiB", r.L2>>10, r.L3>>20)
	return r
}

func le(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

func firstPositive(v ...int64) int64 {
	for _, x := range v {
		if x > 0 {
			return x
		}
	}
	return 0
}
