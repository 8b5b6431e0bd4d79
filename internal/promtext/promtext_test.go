package promtext

import (
	"bytes"
	"strings"
	"testing"
)

type fixed []Metric

func (f fixed) Describe(chan<- *Desc) {}
func (f fixed) Collect(ch chan<- Metric) {
	for _, m := range f {
		ch <- m
	}
}

// TestGather: the text client_golang's promhttp writes for the same
// samples (sorted families, series and labels; HELP and label escaping;
// expfmt's float format).
func TestGather(t *testing.T) {
	c := NewDesc("x_total", "Frames.\nSecond \\ line.", []string{"tenant", "ring"}, nil)
	g := NewDesc("a_fill", "Fill.", nil, Labels{"k": "v"})
	r := NewRegistry()
	r.MustRegister(fixed{
		MustNewConstMetric(c, CounterValue, 1234567, "b", "1"),
		MustNewConstMetric(c, CounterValue, 0, "a\"\n", "0"),
		MustNewConstMetric(c, CounterValue, 1, "a", "10"),
		MustNewConstMetric(g, GaugeValue, 0.5),
	})
	var b bytes.Buffer
	if err := r.Gather(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP a_fill Fill.
# TYPE a_fill gauge
a_fill{k="v"} 0.5
# HELP x_total Frames.\nSecond \\ line.
# TYPE x_total counter
x_total{ring="0",tenant="a\"\n"} 0
x_total{ring="1",tenant="b"} 1.234567e+06
x_total{ring="10",tenant="a"} 1
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestGatherRepeatedSeries(t *testing.T) {
	c := NewDesc("x_total", "X.", []string{"tenant"}, nil)
	r := NewRegistry()
	r.MustRegister(fixed{MustNewConstMetric(c, CounterValue, 1, "a"), MustNewConstMetric(c, CounterValue, 2, "a")})
	var b bytes.Buffer
	if err := r.Gather(&b); err == nil || !strings.Contains(err.Error(), `x_total{tenant="a"}`) {
		t.Errorf("a repeated series: %v", err)
	}
}
