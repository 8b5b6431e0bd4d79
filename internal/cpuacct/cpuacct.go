package cpuacct

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CPUTimes is one CPU's line of /proc/stat, in clock ticks.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// Busy is the time the CPU ran something: user+nice+system+irq+softirq.
func (t CPUTimes) Busy() uint64 { return t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ }

// Total is every field counted, idle, iowait and steal included.
func (t CPUTimes) Total() uint64 { return t.Busy() + t.Idle + t.IOWait + t.Steal }

// Stat is the per-CPU part of /proc/stat, indexed by CPU number (CPUs
// that are offline are absent: zero).
type Stat []CPUTimes

// ParseStat reads the cpuN lines of a /proc/stat.
func ParseStat(r io.Reader) (Stat, error) {
	var s Stat
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("cpu")) || len(line) < 4 || line[3] < '0' || line[3] > '9' {
			continue
		}
		f := strings.Fields(string(line))
		cpu, err := strconv.Atoi(f[0][3:])
		if err != nil || cpu < 0 || cpu > 1<<16 {
			return nil, fmt.Errorf("cpuacct: /proc/stat line %q: bad CPU number", f[0])
		}
		if len(f) < 9 {
			return nil, fmt.Errorf("cpuacct: /proc/stat line for %s has %d fields, want at least 9", f[0], len(f))
		}
		var v [8]uint64
		for i := range v {
			if v[i], err = strconv.ParseUint(f[1+i], 10, 64); err != nil {
				return nil, fmt.Errorf("cpuacct: /proc/stat line for %s: field %d: %w", f[0], i+1, err)
			}
		}
		for len(s) <= cpu {
			s = append(s, CPUTimes{})
		}
		s[cpu] = CPUTimes{User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cpuacct: read /proc/stat: %w", err)
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("cpuacct: /proc/stat has no cpuN lines")
	}
	return s, nil
}

// BusyFractions returns, per CPU, the share of its time between a and b
// that it was busy (0 for a CPU with no time counted).
func BusyFractions(a, b Stat) []float64 {
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		busy := float64(b[i].Busy() - a[i].Busy())
		total := float64(b[i].Total() - a[i].Total())
		if total > 0 && b[i].Total() >= a[i].Total() && b[i].Busy() >= a[i].Busy() {
			out[i] = busy / total
		}
	}
	return out
}

// parseProcStat returns utime+stime, in clock ticks, from the text of a
// /proc/<pid>/stat (the command name, in parentheses, may hold spaces and
// parentheses itself: fields are counted after the last ')').
func parseProcStat(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state(3) ... utime(14) stime(15): indexes 11 and 12.
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	u, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	s, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return u + s, nil
}

// clockTick is USER_HZ, the unit of /proc/stat and /proc/<pid>/stat: 100
// on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// Sample is a point in time's CPU counters.
type Sample struct {
	At   time.Time
	Stat Stat
	Self time.Duration   // this process's user+system time
	NIC  []time.Duration // each NIC process's, by Sampler.NICPids
}

// Usage is what a run used between two samples.
type Usage struct {
	Wall time.Duration
	Busy []float64 // per CPU, 0..1
	Host time.Duration
	NIC  time.Duration
}

// Since is the usage from a to b.
func Since(a, b Sample) Usage {
	u := Usage{Wall: b.At.Sub(a.At), Busy: BusyFractions(a.Stat, b.Stat), Host: b.Self - a.Self}
	for i := range min(len(a.NIC), len(b.NIC)) {
		u.NIC += b.NIC[i] - a.NIC[i]
	}
	return u
}

// PerMillion is d in CPU-seconds per million of n (updates); 0 if n is 0.
func PerMillion(d time.Duration, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return d.Seconds() / float64(n) * 1e6
}

// PerGB is d in CPU-seconds per GB (1e9 bytes); 0 if bytes is 0.
func PerGB(d time.Duration, bytes uint64) float64 {
	if bytes == 0 {
		return 0
	}
	return d.Seconds() / (float64(bytes) / 1e9)
}

// MeanBusy is the mean busy fraction over cpus (0 for none).
func (u Usage) MeanBusy(cpus []int) float64 {
	var sum float64
	n := 0
	for _, c := range cpus {
		if c >= 0 && c < len(u.Busy) {
			sum += u.Busy[c]
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// Idle is the verdict that every CPU of cpus was busy under limit (a
// fraction) during the run, and a sentence saying so or saying which was
// not.
func (u Usage) Idle(cpus []int, limit float64) (bool, string) {
	if len(cpus) == 0 {
		return false, "no CPU to check"
	}
	var busy []string
	for _, c := range cpus {
		if c < 0 || c >= len(u.Busy) {
			return false, fmt.Sprintf("CPU %d was not sampled", c)
		}
		if u.Busy[c] >= limit {
			busy = append(busy, fmt.Sprintf("CPU %d %.1f%%", c, 100*u.Busy[c]))
		}
	}
	if len(busy) > 0 {
		return false, fmt.Sprintf("%s busy (limit %.0f%%): the run may have had help from it, or other work ran there", strings.Join(busy, ", "), 100*limit)
	}
	return true, fmt.Sprintf("CPU %s under %.0f%% busy: the run got no help from it", Format(cpus), 100*limit)
}

// BusyString is the per-CPU busy percentages, e.g. "cpu0=1.2% cpu1=97.0%".
func (u Usage) BusyString() string {
	var b strings.Builder
	for i, f := range u.Busy {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "cpu%d=%.1f%%", i, 100*f)
	}
	return b.String()
}

// Placement is where a comparison runs: the hosts and the load client on
// Host, the emulated NIC (vnicd, or the fabric's engine) on NIC. An empty
// Host leaves this process where it is.
type Placement struct {
	Name      string
	Host, NIC []int
}

// ParsePlacement reads "host=1,nic=0" (CPU lists as taskset -c takes
// them: "1", "0-1", "0,2"; spaces or commas between the two), "none"
// (no pinning) or "" (the default, host=1,nic=0).
func ParsePlacement(s string) (Placement, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		s = "host=1,nic=0"
	}
	if s == "none" {
		return Placement{Name: "none"}, nil
	}
	p := Placement{Name: s}
	// Split on the keys, so that CPU lists may hold commas.
	norm := strings.NewReplacer(" nic=", ";nic=", ",nic=", ";nic=", " host=", ";host=", ",host=", ";host=").Replace(s)
	for _, kv := range strings.Split(norm, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return p, fmt.Errorf("cpuacct: placement %q: give host=CPUS,nic=CPUS (e.g. host=1,nic=0) or none", s)
		}
		cpus, err := ParseList(v)
		if err != nil {
			return p, fmt.Errorf("cpuacct: placement %q: %w", s, err)
		}
		switch k {
		case "host":
			p.Host = cpus
		case "nic":
			p.NIC = cpus
		default:
			return p, fmt.Errorf("cpuacct: placement %q: unknown key %q; give host=CPUS,nic=CPUS or none", s, k)
		}
	}
	if len(p.Host) == 0 {
		return p, fmt.Errorf("cpuacct: placement %q names no host CPUs; give host=CPUS", s)
	}
	for _, c := range p.NIC {
		if slices.Contains(p.Host, c) {
			return p, fmt.Errorf("cpuacct: placement %q puts CPU %d in both sets; give the NIC its own CPUs", s, c)
		}
	}
	return p, nil
}

// Both is every CPU of p, host and NIC: where kernel TCP runs for its best
// case (the reference line).
func (p Placement) Both() []int {
	all := slices.Concat(p.Host, p.NIC)
	slices.Sort(all)
	return slices.Compact(all)
}

// ParseList reads a CPU list as taskset -c takes it: "1", "0-3", "0,2-3".
func ParseList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b > 4095 {
			return nil, fmt.Errorf("CPU list %q: give CPU numbers or ranges, e.g. 1 or 0-1 or 0,2", s)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Format writes cpus as a list ParseList reads ("0-1", "1", "0,2").
func Format(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// LoadAvg is /proc/loadavg's first three fields, or "unknown" where there
// is none: the load a measurement ran under, for its report.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
