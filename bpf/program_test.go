package bpf

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

func TestCollectionSpec(t *testing.T) {
	spec, err := CollectionSpec(0)
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Maps[XSKMapName].MaxEntries; got != DefaultQueues {
		t.Fatalf("XSKMAP size %d", got)
	}
	p := spec.Programs[ProgramName]
	if p == nil || p.Type != ebpf.XDP || p.Instructions.Name() != ProgramName {
		t.Fatalf("program spec %+v", p)
	}
	// Every map reference names a map of the spec, and every jump label
	// exists.
	syms, err := p.Instructions.SymbolOffsets()
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]bool{}
	for _, ins := range p.Instructions {
		ref := ins.Reference()
		if ref == "" {
			continue
		}
		if ins.IsLoadFromMap() {
			if spec.Maps[ref] == nil {
				t.Errorf("instruction %v references unknown map %q", ins, ref)
			}
			refs[ref] = true
			continue
		}
		if _, ok := syms[ref]; !ok {
			t.Errorf("jump to unknown label %q", ref)
		}
	}
	for name := range spec.Maps {
		if !refs[name] {
			t.Errorf("map %s is never used by the program", name)
		}
	}
	// The program must end with exit and never read the packet before a
	// bounds check (the verifier checks the rest when loading).
	if last := p.Instructions[len(p.Instructions)-1]; last.OpCode.JumpOp() != asm.Exit {
		t.Errorf("last instruction %v is not exit", last)
	}
	for _, q := range []int{-1, MaxQueues + 1} {
		if _, err := CollectionSpec(q); err == nil {
			t.Errorf("CollectionSpec(%d) accepted", q)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, {RedirectARP: true}, {PortLo: 0, PortHi: 10}, {PortLo: 9000, PortHi: 9000}, {PortLo: 1, PortHi: 65535}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	for _, c := range []Config{{PortLo: 10}, {PortLo: 20, PortHi: 10}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if v := (Config{PortLo: 5, PortHi: 6, RedirectARP: true}).value(); v.Flags != FlagClaimPorts|FlagRedirectARP || v.PortLo != 5 || v.PortHi != 6 {
		t.Errorf("value %+v", v)
	}
	if v := (Config{}).value(); v != (cfgValue{}) {
		t.Errorf("zero config value %+v", v)
	}
	if binary.Size(cfgValue{}) != cfgSize {
		t.Errorf("cfgValue is %d bytes, the map holds %d", binary.Size(cfgValue{}), cfgSize)
	}
	if err := (Options{Queues: -1}).Validate(); err == nil {
		t.Error("negative queues accepted")
	}
	if err := (Options{Config: Config{PortLo: 3, PortHi: 1}}).Validate(); err == nil {
		t.Error("bad config accepted")
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": ModeAuto, "auto": ModeAuto, "native": ModeNative, "Driver": ModeNative, "drv": ModeNative, "generic": ModeGeneric, " skb ": ModeGeneric} {
		got, err := ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v", in, got, err)
		}
		if err == nil && got.String() != strings.ToLower(got.String()) {
			t.Errorf("mode name %q", got)
		}
	}
	if _, err := ParseMode("offload"); err == nil {
		t.Error("offload accepted")
	}
	for _, m := range []Mode{ModeAuto, ModeNative, ModeGeneric} {
		if back, err := ParseMode(m.String()); err != nil || back != m {
			t.Errorf("round trip of %v: %v, %v", m, back, err)
		}
	}
	if Mode(7).String() != "Mode(7)" {
		t.Error(Mode(7).String())
	}
}

func TestCountersTotal(t *testing.T) {
	if (Counters{1, 2, 3, 4, 5}).Total() != 15 {
		t.Error("Total")
	}
}
