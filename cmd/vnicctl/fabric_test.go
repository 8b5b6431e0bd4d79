package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// vnicctl fabric fits 80 columns with large counts and the widest
// addresses, shows every drop reason per host, and -o wide every column
// exactly.
func TestFabricTable(t *testing.T) {
	big := map[string]uint64{}
	for i, col := range fabricColumns {
		big[col.key] = 123_456_789_012 + uint64(i)
	}
	hosts := []hostRow{
		{Tenant: 1, Name: "a", Addr: "198.18.255.255", Ledger: big},
		{Tenant: 2, Name: "b", Addr: "198.19.0.2", Detached: true, Ledger: map[string]uint64{"sent": 5, "loss": 2, "delivered": 3}},
	}
	model := "fabric between the hosts: flow 3.2 Gbit/s, 16 DPUs at 0.96 Mpps, NIC 80 Gbit/s; aws-c7gn scaled by 0.40 (this engine's 10 Mpps over the paper's 25 Mpps)"
	var out bytes.Buffer
	if err := writeFabric(&out, model, map[string]uint64{"fabric_delayed": 7}, hosts, false); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for i, l := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(l); n > termWidth {
			t.Errorf("line %d is %d columns wide:\n%s", i+1, n, l)
		}
	}
	for _, want := range []string{"SPOOF", "NOHOST", "FLOW", "DPU", "NIC", "LOSS", "FULL", "123G", "198.18.255.255", "198.19.0.2*", "delay line: 7"} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}
	out.Reset()
	if err := writeFabric(&out, model, nil, hosts, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RECEIVED", "SPOOFED", "DELAY_FULL", "SENT_BYTES", "123456789012", "123456789022"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("wide output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestShortCounts(t *testing.T) {
	for v, want := range map[uint64]string{0: "0", 999999: "999999", 1_000_000: "1.00M", 12_345_678: "12.3M", 999_499_999: "999M", 999_500_000: "1.00G", 1 << 63: "9.22E"} {
		if got := short(v); got != want || len(got) > 6 {
			t.Errorf("short(%d) = %q, want %q", v, got, want)
		}
	}
}
