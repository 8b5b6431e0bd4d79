// Package promtext serves metrics in the Prometheus text exposition format
// (version 0.0.4) with the subset of github.com/prometheus/client_golang's
// API that vnicd's /metrics uses: descriptions, constant metrics read at
// scrape time by a collector, a registry and its HTTP handler.
//
// vnicd used client_golang for this, but that library pulls
// google.golang.org/protobuf, prometheus/common, client_model and procfs
// into vnicd: 48 packages, about 13% of the CPU time of a cold build of
// vnicd, vnicctl and rxcount (what make demo builds), for a page of text.
// The output is what promhttp.HandlerFor wrote for the same collector:
// families sorted by name, each with its HELP and TYPE lines, series
// sorted by label values, labels sorted by name, values formatted as
// expfmt formats them, gzip when the scraper accepts it, and a 500 that
// names the series when a collector repeats one.
package promtext

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Labels are constant label pairs of a Desc.
type Labels map[string]string

// Desc describes a metric family: its name, help and label names.
type Desc struct {
	name   string
	help   string
	labels []string // variable label names
	consts Labels
}

// NewDesc describes a family with variable labels (their values are given
// to MustNewConstMetric, in this order) and constant ones (may be nil).
func NewDesc(name, help string, variableLabels []string, constLabels Labels) *Desc {
	return &Desc{name: name, help: help, labels: append([]string(nil), variableLabels...), consts: constLabels}
}

// ValueType is a sample's type: a counter or a gauge.
type ValueType int

const (
	_ ValueType = iota
	CounterValue
	GaugeValue
)

func (t ValueType) String() string {
	if t == CounterValue {
		return "counter"
	}
	return "gauge"
}

// Metric is one sample of a family.
type Metric struct {
	desc   *Desc
	typ    ValueType
	value  float64
	labels [][2]string // name, value; sorted by name
}

// MustNewConstMetric returns a sample of desc; it panics when the number
// of label values is not the number of desc's variable labels.
func MustNewConstMetric(desc *Desc, typ ValueType, value float64, labelValues ...string) Metric {
	if len(labelValues) != len(desc.labels) {
		panic(fmt.Sprintf("promtext: %s has %d variable labels, got %d values", desc.name, len(desc.labels), len(labelValues)))
	}
	m := Metric{desc: desc, typ: typ, value: value, labels: make([][2]string, 0, len(labelValues)+len(desc.consts))}
	for i, v := range labelValues {
		m.labels = append(m.labels, [2]string{desc.labels[i], v})
	}
	for k, v := range desc.consts {
		m.labels = append(m.labels, [2]string{k, v})
	}
	sort.Slice(m.labels, func(i, j int) bool { return m.labels[i][0] < m.labels[j][0] })
	return m
}

// Collector describes its families and sends their samples at scrape time.
type Collector interface {
	Describe(chan<- *Desc)
	Collect(chan<- Metric)
}

// Registry holds the collectors a handler scrapes.
type Registry struct{ cs []Collector }

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// MustRegister adds collectors to r.
func (r *Registry) MustRegister(cs ...Collector) { r.cs = append(r.cs, cs...) }

// Gather writes every collector's samples in the text format.
func (r *Registry) Gather(w *bytes.Buffer) error {
	ch := make(chan Metric, 64)
	go func() {
		for _, c := range r.cs {
			c.Collect(ch)
		}
		close(ch)
	}()
	fams := map[string][]Metric{}
	for m := range ch {
		fams[m.desc.name] = append(fams[m.desc.name], m)
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	var err error
	for _, n := range names {
		ms := fams[n]
		sort.SliceStable(ms, func(i, j int) bool { return labelsLess(ms[i].labels, ms[j].labels) })
		for i := 1; i < len(ms); i++ {
			if !labelsLess(ms[i-1].labels, ms[i].labels) && err == nil {
				err = fmt.Errorf("collected metric %s%s was collected before with the same name and label values", n, labelString(ms[i].labels))
			}
		}
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", n, escape(ms[0].desc.help, false), n, ms[0].typ)
		for _, m := range ms {
			w.WriteString(n)
			w.WriteString(labelString(m.labels))
			w.WriteByte(' ')
			w.WriteString(formatFloat(m.value))
			w.WriteByte('\n')
		}
	}
	return err
}

// Handler serves r's samples, as promhttp.HandlerFor(r, HandlerOpts{})
// does: an error is a 500 that says what went wrong.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var buf bytes.Buffer
		if err := r.Gather(&buf); err != nil {
			http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if acceptsGzip(req.Header.Get("Accept-Encoding")) {
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(w)
			gz.Write(buf.Bytes())
			gz.Close()
			return
		}
		w.Write(buf.Bytes())
	})
}

func acceptsGzip(h string) bool {
	for _, part := range strings.Split(h, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(enc) != "gzip" {
			continue
		}
		if q, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
				return false
			}
		}
		return true
	}
	return false
}

func labelsLess(a, b [][2]string) bool {
	for i := range a {
		if i >= len(b) {
			return false
		}
		if a[i][1] != b[i][1] {
			return a[i][1] < b[i][1]
		}
	}
	return len(a) < len(b)
}

func labelString(ls [][2]string) string {
	if len(ls) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l[0])
		b.WriteString(`="`)
		b.WriteString(escape(l[1], true))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// escape escapes a HELP text (backslash and newline) or a label value
// (also the double quote), as the text format requires.
func escape(s string, quote bool) string {
	if !strings.ContainsAny(s, "\\\n\"") {
		return s
	}
	var b strings.Builder
	for _, c := range s {
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '"' && quote:
			b.WriteString(`\"`)
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// formatFloat formats a value as expfmt's text encoder does.
func formatFloat(f float64) string {
	switch {
	case f == 1:
		return "1"
	case f == 0:
		return "0"
	case f == -1:
		return "-1"
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, +1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
