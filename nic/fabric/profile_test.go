package fabric_test

import (
	"strings"
	"testing"

	"github.com/vnic/vnic/nic/fabric"
)

// aws-c7gn is the paper's figures times one stated factor.
func TestProfileScalesThePaper(t *testing.T) {
	p, err := fabric.LookupProfile("AWS-C7GN")
	if err != nil {
		t.Fatal(err)
	}
	s := p.Scale
	if s <= 0 || s > 1 {
		t.Fatalf("scale %v", s)
	}
	c := p.Config
	for _, v := range []struct {
		what      string
		got, want float64
	}{{"flow", c.FlowBps, 8e9 * s}, {"DPU", c.DPUPps, 2.4e6 * s}, {"NIC", c.NICBps, 200e9 * s}} {
		if v.got != v.want {
			t.Errorf("%s: %v, want the paper's times %v: %v", v.what, v.got, s, v.want)
		}
	}
	if c.DPUs == 0 || c.Loss != 0 || c.Delay != 0 {
		t.Errorf("config %+v", c)
	}
	if !strings.Contains(p.Note, "scaled by") || err != nil {
		t.Errorf("note %q does not state the factor", p.Note)
	}
	if _, err := fabric.LookupProfile("gcp"); err == nil || !strings.Contains(err.Error(), "aws-c7gn") {
		t.Fatalf("unknown profile: %v", err)
	}
	f, err := fabric.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if d := f.Describe(); !strings.Contains(d, "16 DPUs") {
		t.Fatalf("describe: %s", d)
	}
}
