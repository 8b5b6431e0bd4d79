package testutil

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Knobs are the environment variables that change what vnic's tests and
// benchmarks do: every one of them, in one struct, parsed once per process
// by LoadKnobs with one set of rules. docs/knobs.md holds the table
// KnobsTable renders from it; a test fails when the two disagree.
//
// Each field's tags give its variable (env), its value when the variable
// is unset or empty (default: the zero value when absent), the range a set
// value must lie in (min, max; pow2 for a power of two) and what it does
// (doc). Rules, for every knob:
//   - unset or empty: the default;
//   - int: a decimal integer, underscores allowed (1_000_000), within
//     [min, max];
//   - bool: 1, t, true, 0, f, false (any case);
//   - time.Duration: a Go duration (10m, 500ms), above zero;
//   - string: taken as it is.
//
// Anything else is an error that names the variable and the value.
type Knobs struct {
	// Receivers benchmark (tests/bench_linux_test.go).
	BenchFrames     int    `env:"VNIC_BENCH_FRAMES" default:"1000000" min:"1000" doc:"frames per run of BenchmarkReceivers"`
	BenchReps       int    `env:"VNIC_BENCH_REPS" default:"6" min:"1" doc:"interleaved repetitions of every receiver in BenchmarkReceivers"`
	BenchReceivers  string `env:"VNIC_BENCH_RECEIVERS" doc:"comma-separated subset of BenchmarkReceivers' receivers to run (e.g. vnicd-coal,afpacket-v3); empty: all"`
	BenchVnicdAlt   string `env:"VNIC_BENCH_VNICD_ALT" doc:"a second vnicd binary (e.g. an older build); adds the vnicd-coal@alt and vnicd-adapt@alt receivers for an A/B"`
	BenchBudgetMs   int    `env:"VNIC_BENCH_BUDGET_MS" default:"10" min:"1" max:"10" doc:"latency budget (ms) of the moderating receivers: AF_PACKET's block timeout and vnicd-adapt's --rx-coalesce-max-usecs"`
	BenchQueues     int    `env:"VNIC_BENCH_QUEUES" default:"2" min:"1" max:"8" doc:"queues (one receive thread each) of vnicd's tenant in BenchmarkReceivers"`
	BenchAdaptMinUs int    `env:"VNIC_BENCH_ADAPT_MIN_US" default:"50" min:"1" doc:"vnicd-adapt's shortest nap, its --rx-coalesce-usecs (µs)"`
	BenchCoalesceUs int    `env:"VNIC_BENCH_COALESCE_US" default:"200" min:"1" doc:"vnicd-coal's fixed nap (µs): vnicd's --rx-coalesce-usecs and the client's Coalesce"`
	BenchXskRing    int    `env:"VNIC_BENCH_XSK_RING" min:"64" max:"65536" pow2:"true" doc:"AF_XDP RX and fill ring size of vnicd and afxdp-raw; unset: vnicd's own sizing and xsk.DefaultRingSize"`
	BenchGap        string `env:"VNIC_BENCH_GAP" doc:"trafgen --gap after every frame (e.g. 10us): a sender-paced low rate instead of the full rate"`
	BenchPerf       string `env:"VNIC_BENCH_PERF" doc:"a directory: record each receiver run with perf record -g into it"`
	BenchShmemTHP   string `env:"VNIC_BENCH_SHMEM_THP" doc:"shmem transparent huge page policy (e.g. advise) set for the benchmark and restored after it"`
	BenchVnicdCPU   int    `env:"VNIC_BENCH_VNICD_CPU" min:"0" max:"1" doc:"the CPU vnicd is pinned to: 0 beside the sender, 1 beside its client (napping modes only)"`
	BenchPages      string `env:"VNIC_BENCH_PAGES" doc:"huge: the engine benchmarks in nic/ put buffers, rings and frames on huge pages; empty: small pages"`

	// Hand-off tests (tests/handoff_linux_test.go).
	HandoffBench       bool   `env:"VNIC_HANDOFF_BENCH" doc:"run TestIntegrationHandoffBench (the copy path against the hand-off)"`
	HandoffFrames      int    `env:"VNIC_HANDOFF_FRAMES" default:"500000" min:"1" doc:"frames per run of TestIntegrationHandoffBench"`
	HandoffReps        int    `env:"VNIC_HANDOFF_REPS" default:"3" min:"1" doc:"repetitions of each path in TestIntegrationHandoffBench"`
	HandoffPayload     int    `env:"VNIC_HANDOFF_PAYLOAD" default:"18" min:"1" doc:"UDP payload bytes of TestIntegrationHandoffBench's frames"`
	HandoffPerf        bool   `env:"VNIC_HANDOFF_PERF" doc:"profile vnicd with perf record during TestIntegrationHandoffBench"`
	HandoffArgs        string `env:"VNIC_HANDOFF_ARGS" doc:"more vnicd flags for both paths of TestIntegrationHandoffBench (e.g. --ax-size 2048)"`
	HandoffOrderFrames int    `env:"VNIC_HANDOFF_ORDER_FRAMES" default:"200000" min:"1" doc:"frames TestIntegrationHandoffOrder hands off (make soak: 10000000)"`

	// Soak runs.
	Soak         bool          `env:"VNIC_SOAK" doc:"the soak sizes: TestIntegrationHostileMaxima at 64 tenants, TestWakeupExchanges at 1,000,000 exchanges (make soak)"`
	SoakDuration time.Duration `env:"VNIC_SOAK_DURATION" doc:"how long nic's TestSoakMixedMigrating runs (make soak: 10m); unset: a one-second smoke run"`

	// Bi-channel benchmark (tests/bichannel_*_linux_test.go).
	BichMTU           int    `env:"BICH_MTU" default:"1500" min:"68" doc:"the bi-channel testbed's link MTU (the server process inherits it)"`
	BichReps          int    `env:"BICH_REPS" default:"3" min:"1" doc:"repetitions of every variant in BenchmarkBichannelTestbed"`
	BichPingMs        int    `env:"BICH_PING_MS" default:"1000" min:"1" doc:"length (ms) of each ping-pong run"`
	BichPipeMs        int    `env:"BICH_PIPE_MS" default:"1000" min:"1" doc:"length (ms) of each pipelined run"`
	BichWindow        int    `env:"BICH_WINDOW" default:"32" min:"1" doc:"messages in flight in the pipelined runs"`
	BichBatches       int    `env:"BICH_BATCHES" default:"20000" min:"1" doc:"8 KiB batches of the bulk runs"`
	BichVariants      string `env:"BICH_VARIANTS" doc:"comma-separated subset of the variants (bichannel, tcp, bichannel_kudp); empty: all"`
	BichStages        bool   `env:"BICH_STAGES" doc:"also run the stamped ping-pong that splits a round trip into its stages"`
	BichStagesFile    string `env:"BICH_STAGES_FILE" doc:"file the stamped round trips are written to (scripts/bichstages.py reads it)"`
	BichFig16         bool   `env:"BICH_FIG16" default:"true" doc:"run the offered-load sweep (the paper's Figure 16); 0 skips it"`
	BichFig16Ms       int    `env:"BICH_FIG16_MS" default:"400" min:"1" doc:"length (ms) of each point of the sweep"`
	BichFig16Rates    string `env:"BICH_FIG16_RATES" doc:"comma-separated offered rates (messages/s) of the sweep; empty: 1000 to 320000"`
	BichFig16Reps     int    `env:"BICH_FIG16_REPS" default:"3" min:"1" doc:"repetitions of each point of the sweep"`
	BichFig16CSV      string `env:"BICH_FIG16_CSV" doc:"file the sweep's points are written to as CSV"`
	BichPlacement     string `env:"BICH_PLACEMENT" doc:"niccore or split: defaults for the placement knobs below (each still wins when set); empty: none"`
	BichVnicdArgs     string `env:"BICH_VNICD_ARGS" doc:"more vnicd flags for the bi-channel testbed (later flags win)"`
	BichAppCPU        int    `env:"BICH_APP_CPU" default:"-1" min:"-1" doc:"CPU the client process is pinned to (with GOMAXPROCS 1); -1: not pinned"`
	BichVnicSpinUs    int    `env:"BICH_VNIC_SPIN_US" doc:"VNICConfig.Spin of the client's vNIC fast path (µs); 0: the library's default, -1: no spinning"`
	BichVnicOwnCPU    bool   `env:"BICH_VNIC_OWNCPU" doc:"VNICConfig.OwnCPU of the client's vNIC fast path"`
	BichGOMAXPROCS    int    `env:"BICH_GOMAXPROCS" min:"0" doc:"GOMAXPROCS of the client and the server process; 0: Go's default"`
	BichSrvGOMAXPROCS int    `env:"BICH_SRV_GOMAXPROCS" min:"0" doc:"GOMAXPROCS of the server process; 0: BICH_GOMAXPROCS"`
	BichSrvCPUs       string `env:"BICH_SRV_CPUS" doc:"taskset CPU list of the server process"`
	BichSrvStats      bool   `env:"BICH_SRV_STATS" doc:"the server process reports its endpoints' statistics"`
	BichSrvCPUProfile string `env:"BICH_SRV_CPUPROFILE" doc:"file the server process writes its CPU profile to"`

	set map[string]bool // the knobs the environment set
}

// ChildEnv are environment variables that are not knobs: tests set them
// for child processes they start themselves (a re-executed test binary)
// or they belong to a program, not to the tests. KnobsTable lists them so
// that every variable the code reads is in docs/knobs.md.
var ChildEnv = []struct{ Name, Doc string }{
	{"BICH_SERVER", "marks the bi-channel benchmark's server process (the test binary re-executed in the peer namespace)"},
	{"BICH_SRV_IP", "the server process's address"},
	{"BICH_SRV_N1", "the control address of the server's vNIC peer"},
	{"BICH_SRV_N1K", "the control address of the server's kernel-UDP peer"},
	{"VNIC_BENCH_CHILD", "internal/daemon's cross-process bench consumer: the socket"},
	{"VNIC_BENCH_CPU", "internal/daemon's cross-process bench consumer: its CPU"},
	{"VNIC_BENCH_EMULATOR_CPU", "internal/daemon's cross-process bench consumer: the engine's CPU, which it refuses to share"},
	{"VNIC_BENCH_WINDOW", "internal/daemon's cross-process bench consumer: how long it receives"},
	{"VNIC_DAEMON_TEST_CLIENT", "internal/daemon's killed-client test child: the socket"},
	{"VNIC_DAEMON_TEST_CHILD", "internal/daemon's reserved-connection test children: their role (vnicd, flood or client)"},
	{"VNIC_DAEMON_TEST_PARAMS", "internal/daemon's reserved-connection test children: their parameters (JSON)"},
	{"VNIC_HOSTILE_CHILD", "tests/hostile's attacker child: its kind"},
	{"VNIC_HOSTILE_SOCKET", "tests/hostile's attacker child: the socket"},
	{"VNIC_HOSTILE_PARAMS", "tests/hostile's attacker child: its parameters (JSON)"},
	{"VNIC_RING_CHILD", "ring's cross-process test child: its role"},
	{"VNIC_TEST_WAKE_WRITER", "client's netpoller wake benchmark child: how many wakes it writes into the pipe"},
	{"VNIC_RING_SIZE", "ring's cross-process test child: the ring size"},
	{"VNIC_ALLOC_TEST_HELPER", "alloc's lossless test child: its mode (and _FILE: its file)"},
	{"VNIC_BPF_TEST_HELPER", "bpf's attach test child: its argument"},
	{"VNICCTL_TEST_MAIN_ARGS", "cmd/vnicctl's exit-status test child: vnicctl's arguments"},
	{"VNIC_SOCKET", "the quickstart example's vnicd socket (a program's setting, not a test knob)"},
	{"SHUFFLE_DEBUG", "the shuffle example's debug output (a program's setting, not a test knob)"},
	{"VNIC_KV_NODE", "marks a KV node process of `-procs per-host` (the kv command re-executed): its spec (JSON)"},
	{"VNIC_SHUFFLE_HOST", "marks a shuffle host process of `-procs per-host` (the shuffle command re-executed): its spec (JSON)"},
}

var (
	knobsOnce sync.Once
	knobsVal  *Knobs
	knobsErr  error
)

// LoadKnobs parses the knobs from the environment, once per process; later
// calls return the first one's result. The error names every variable
// whose value breaks the rules, with its value.
func LoadKnobs() (*Knobs, error) {
	knobsOnce.Do(func() { knobsVal, knobsErr = ParseKnobs(os.LookupEnv) })
	return knobsVal, knobsErr
}

// KnobsFor is LoadKnobs that fails the test on an error.
func KnobsFor(tb testing.TB) *Knobs {
	tb.Helper()
	k, err := LoadKnobs()
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// ParseKnobs parses the knobs from lookup (os.LookupEnv, or a map's in a
// test).
func ParseKnobs(lookup func(string) (string, bool)) (*Knobs, error) {
	k := &Knobs{set: map[string]bool{}}
	var errs []string
	forKnobs(k, func(f reflect.StructField, v reflect.Value) {
		if err := setField(f, v, f.Tag.Get("default"), false); err != nil {
			panic(fmt.Sprintf("testutil: the default of %s: %v", f.Tag.Get("env"), err))
		}
		s, ok := lookup(f.Tag.Get("env"))
		if !ok || s == "" {
			return
		}
		if err := setField(f, v, s, true); err != nil {
			errs = append(errs, err.Error())
			return
		}
		k.set[f.Tag.Get("env")] = true
	})
	if errs != nil {
		return nil, fmt.Errorf("test knobs: %s (docs/knobs.md)", strings.Join(errs, "; "))
	}
	return k, nil
}

// IsSet says whether the environment set the knob named env.
func (k *Knobs) IsSet(env string) bool { return k.set[env] }

// Set sets the knob named env to value by the same rules as the
// environment (a benchmark's defaults for other knobs); it does not make
// IsSet true.
func (k *Knobs) Set(env, value string) error {
	var err = fmt.Errorf("no test knob %s", env)
	forKnobs(k, func(f reflect.StructField, v reflect.Value) {
		if f.Tag.Get("env") == env {
			err = setField(f, v, value, true)
		}
	})
	return err
}

func forKnobs(k *Knobs, fn func(reflect.StructField, reflect.Value)) {
	v := reflect.ValueOf(k).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Type().Field(i); f.IsExported() {
			fn(f, v.Field(i))
		}
	}
}

var durationType = reflect.TypeOf(time.Duration(0))

// setField parses s into v by f's type and, when check is set, f's range.
func setField(f reflect.StructField, v reflect.Value, s string, check bool) error {
	name := f.Tag.Get("env")
	if s == "" {
		v.SetZero()
		return nil
	}
	switch {
	case f.Type == durationType:
		d, err := time.ParseDuration(s)
		if err != nil || (check && d <= 0) {
			return fmt.Errorf("%s=%q: give a duration above zero such as 10m", name, s)
		}
		v.SetInt(int64(d))
	case f.Type.Kind() == reflect.Int:
		n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
		if err != nil {
			return fmt.Errorf("%s=%q: give an integer", name, s)
		}
		if check {
			if lo, ok := intTag(f, "min"); ok && n < lo {
				return fmt.Errorf("%s=%q: give an integer of at least %d", name, s, lo)
			}
			if hi, ok := intTag(f, "max"); ok && n > hi {
				return fmt.Errorf("%s=%q: give an integer of at most %d", name, s, hi)
			}
			if f.Tag.Get("pow2") == "true" && n&(n-1) != 0 {
				return fmt.Errorf("%s=%q: give a power of two", name, s)
			}
		}
		v.SetInt(int64(n))
	case f.Type.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%s=%q: give 1 or 0", name, s)
		}
		v.SetBool(b)
	case f.Type.Kind() == reflect.String:
		v.SetString(s)
	default:
		return fmt.Errorf("%s: a knob of type %s", name, f.Type)
	}
	return nil
}

func intTag(f reflect.StructField, tag string) (int, bool) {
	s, ok := f.Tag.Lookup(tag)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(fmt.Sprintf("testutil: %s's %s tag %q", f.Tag.Get("env"), tag, s))
	}
	return n, true
}

// KnobsTable is docs/knobs.md's tables in Markdown: the knobs with their
// type, default, range and what they do, then the variables that are not
// knobs (ChildEnv).
func KnobsTable() string {
	var b strings.Builder
	b.WriteString("| Variable | Type | Default | Range | What it does |\n|---|---|---|---|---|\n")
	forKnobs(&Knobs{}, func(f reflect.StructField, _ reflect.Value) {
		typ := f.Type.String()
		if f.Type == durationType {
			typ = "duration"
		}
		def := f.Tag.Get("default")
		switch {
		case def != "":
		case f.Type.Kind() == reflect.String:
			def = "empty"
		case f.Type == durationType:
			def = "unset"
		default:
			def = fmt.Sprint(reflect.Zero(f.Type).Interface())
		}
		var rng []string
		if lo, ok := intTag(f, "min"); ok {
			rng = append(rng, fmt.Sprintf("≥ %d", lo))
		}
		if hi, ok := intTag(f, "max"); ok {
			rng = append(rng, fmt.Sprintf("≤ %d", hi))
		}
		if f.Tag.Get("pow2") == "true" {
			rng = append(rng, "power of two")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.Tag.Get("env"), typ, def, strings.Join(rng, ", "), f.Tag.Get("doc"))
	})
	b.WriteString("\nNot knobs: variables a test sets for a child process it starts, or that belong to a program.\n\n| Variable | What it is |\n|---|---|\n")
	for _, c := range ChildEnv {
		fmt.Fprintf(&b, "| `%s` | %s |\n", c.Name, c.Doc)
	}
	return b.String()
}
