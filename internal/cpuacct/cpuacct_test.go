package cpuacct

import (
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func readFixture(t *testing.T, name string) Stat {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ParseStat(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestParseStat reads the per-CPU lines of a /proc/stat fixture (the
// aggregate "cpu" line, interrupts and softirq lines are not CPUs).
func TestParseStat(t *testing.T) {
	s := readFixture(t, "stat")
	if len(s) != 2 {
		t.Fatalf("%d CPUs, want 2", len(s))
	}
	want := CPUTimes{User: 1335303, Nice: 33016, System: 404117, Idle: 13342934, IOWait: 3420, IRQ: 12, SoftIRQ: 3, Steal: 5}
	if s[1] != want {
		t.Fatalf("cpu1 = %+v, want %+v", s[1], want)
	}
	if got := s[1].Busy(); got != 1335303+33016+404117+12+3 {
		t.Errorf("cpu1 busy = %d", got)
	}
	for _, bad := range []string{"cpu0 1 2 3\n", "cpu0 1 2 3 4 5 6 x 8\n", "intr 1 2\n", "cpux 1 2 3 4 5 6 7 8\n"} {
		if _, err := ParseStat(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseStat(%q) took it", bad)
		}
	}
}

// TestBusyAndVerdict: between the two fixtures CPU 0 ran 2 ticks of 100
// (2%: idle by a 5% limit) and CPU 1 ran 90 of 100 (90%); the verdict
// names the busy CPU.
func TestBusyAndVerdict(t *testing.T) {
	a, b := readFixture(t, "stat"), readFixture(t, "stat2")
	u := Since(Sample{Stat: a, Self: time.Second}, Sample{Stat: b, Self: 3 * time.Second})
	if math.Abs(u.Busy[0]-0.02) > 1e-9 || math.Abs(u.Busy[1]-0.90) > 1e-9 {
		t.Fatalf("busy %v, want [0.02 0.90]", u.Busy)
	}
	if u.Host != 2*time.Second {
		t.Errorf("host CPU %v, want 2s", u.Host)
	}
	if ok, msg := u.Idle([]int{0}, 0.05); !ok || !strings.Contains(msg, "no help") {
		t.Errorf("CPU 0 at 2%%: verdict %v %q", ok, msg)
	}
	if ok, msg := u.Idle([]int{0, 1}, 0.05); ok || !strings.Contains(msg, "CPU 1 90.0%") {
		t.Errorf("CPU 1 at 90%%: verdict %v %q", ok, msg)
	}
	if ok, _ := u.Idle([]int{7}, 0.05); ok {
		t.Error("an unsampled CPU passed the verdict")
	}
	if got := u.BusyString(); got != "cpu0=2.0% cpu1=90.0%" {
		t.Errorf("BusyString %q", got)
	}
	if got := PerMillion(2*time.Second, 500000); got != 4 {
		t.Errorf("PerMillion = %v, want 4", got)
	}
	if got := PerGB(3*time.Second, 2e9); got != 1.5 {
		t.Errorf("PerGB = %v, want 1.5", got)
	}
}

// TestParseProcStat: utime and stime are counted after the last ')' of
// the command name, which may hold spaces and parentheses.
func TestParseProcStat(t *testing.T) {
	line := "4242 (we ird) (name) S 1 4242 4242 0 -1 4194560 100 0 0 0 731 269 0 0 20 0 9 0 12345 1000000 200 18446744073709551615\n"
	got, err := parseProcStat([]byte(line))
	if err != nil || got != 1000 {
		t.Fatalf("parseProcStat = %d, %v; want 1000", got, err)
	}
	if _, err := parseProcStat([]byte("4242 (x) S 1 2")); err == nil {
		t.Error("a short line was taken")
	}
}

func TestParsePlacement(t *testing.T) {
	for in, want := range map[string]Placement{
		"":                 {Name: "host=1,nic=0", Host: []int{1}, NIC: []int{0}},
		"host=1 nic=0":     {Name: "host=1 nic=0", Host: []int{1}, NIC: []int{0}},
		"host=2-3,nic=0,1": {Name: "host=2-3,nic=0,1", Host: []int{2, 3}, NIC: []int{0, 1}},
		"nic=0,host=1,3":   {Name: "nic=0,host=1,3", Host: []int{1, 3}, NIC: []int{0}},
		"host=1":           {Name: "host=1", Host: []int{1}},
		"none":             {Name: "none"},
	} {
		got, err := ParsePlacement(in)
		if err != nil || got.Name != want.Name || !slices.Equal(got.Host, want.Host) || !slices.Equal(got.NIC, want.NIC) {
			t.Errorf("ParsePlacement(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"host=1,nic=1", "nic=0", "host=x", "cpu=1", "host=3-1", "1"} {
		if _, err := ParsePlacement(bad); err == nil {
			t.Errorf("ParsePlacement(%q) took it", bad)
		}
	}
	p, _ := ParsePlacement("host=1,nic=0")
	if got := Format(p.Both()); got != "0-1" {
		t.Errorf("Both = %s, want 0-1", got)
	}
	if got := Format([]int{0, 2, 3, 4, 7}); got != "0,2-4,7" {
		t.Errorf("Format = %s", got)
	}
}

// LoadAvg reads three numbers from /proc/loadavg (where there is one).
func TestLoadAvg(t *testing.T) {
	la := LoadAvg()
	if _, err := os.Stat("/proc/loadavg"); err != nil {
		if la != "unknown" {
			t.Fatalf("LoadAvg without /proc/loadavg: %q", la)
		}
		return
	}
	if f := strings.Fields(la); len(f) != 3 {
		t.Fatalf("LoadAvg %q: want three fields", la)
	}
}
