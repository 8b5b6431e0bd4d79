package bpf

import (
	"bytes"
	"encoding/binary"
	"net/netip"
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
	pfx := netip.MustParsePrefix
	good := []Config{{}, {RedirectARP: true}, {ClaimAll: true},
		{Claims: []Claim{{Proto: 17, PortLo: 9000, PortHi: 9000}}},
		{Claims: []Claim{{PortLo: 1, PortHi: 65535}, {Dst: pfx("198.18.0.0/15")}, {Proto: 1}}},
		{Claims: make([]Claim, 0, MaxClaims+1)}}
	for _, c := range good {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	many := make([]Claim, MaxClaims+1)
	for i := range many {
		many[i] = Claim{Proto: 17}
	}
	bad := []Config{{Claims: []Claim{{PortLo: 10}}}, {Claims: []Claim{{PortLo: 20, PortHi: 10}}},
		{Claims: []Claim{{}}}, {Claims: []Claim{{Proto: 1, PortLo: 1, PortHi: 2}}}, {Claims: many}}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if v := (Config{}).value(); len(v) != cfgSize || !bytes.Equal(v, make([]byte, cfgSize)) {
		t.Errorf("zero config value %x", v)
	}
	v := (Config{RedirectARP: true, MinIPLen: 64, Claims: []Claim{
		{Proto: 17, PortLo: 5, PortHi: 6},
		{Dst: pfx("10.1.2.3/8")},
		{Proto: 6, Dst: pfx("2001:db8::/33")},
	}}).value()
	ne := binary.NativeEndian
	if ne.Uint32(v[cfgOffFlags:]) != FlagRedirectARP || ne.Uint16(v[cfgOffMinIPLen:]) != 64 || ne.Uint16(v[cfgOffCount:]) != 3 {
		t.Errorf("header %x", v[:cfgHdrSize])
	}
	r0 := v[cfgHdrSize:]
	if r0[ruleOffProto] != 17 || r0[ruleOffPorts] != 1 || ne.Uint16(r0[ruleOffLo:]) != 5 || ne.Uint16(r0[ruleOffHi:]) != 6 || r0[ruleOffFamily] != 0 {
		t.Errorf("rule 0 %x", r0[:ruleSize])
	}
	r1 := v[cfgHdrSize+ruleSize:]
	if r1[ruleOffFamily] != 4 || r1[ruleOffPorts] != 0 || !bytes.Equal(r1[ruleOffAddr:ruleOffAddr+4], []byte{10, 0, 0, 0}) ||
		!bytes.Equal(r1[ruleOffMask:ruleOffMask+8], []byte{255, 0, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("rule 1 %x", r1[:ruleSize])
	}
	r2 := v[cfgHdrSize+2*ruleSize:]
	if r2[ruleOffFamily] != 6 || r2[ruleOffProto] != 6 || !bytes.Equal(r2[ruleOffMask:ruleOffMask+16], []byte{255, 255, 255, 255, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) ||
		!bytes.Equal(r2[ruleOffAddr:ruleOffAddr+5], []byte{0x20, 0x01, 0x0d, 0xb8, 0}) {
		t.Errorf("rule 2 %x", r2[:ruleSize])
	}
	for c, want := range map[Claim]string{
		{Proto: 17, PortLo: 9000, PortHi: 9099}: "udp ports 9000-9099",
		{Proto: 6, PortLo: 80, PortHi: 80}:      "tcp port 80",
		{Dst: pfx("198.18.1.1/15")}:             "to 198.18.0.0/15",
		{Proto: 1, Dst: pfx("198.18.0.1/32")}:   "ip proto 1 to 198.18.0.1/32",
	} {
		if got := c.String(); got != want {
			t.Errorf("%+v: %q, want %q", c, got, want)
		}
	}
	if err := (Options{Queues: -1}).Validate(); err == nil {
		t.Error("negative queues accepted")
	}
	if err := (Options{Config: Config{Claims: []Claim{{PortLo: 3, PortHi: 1}}}}).Validate(); err == nil {
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
