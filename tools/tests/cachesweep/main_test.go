package main

import (
	"encoding/binary"
	"encoding/csv"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/vnic/vnic/wire/synth"
)

// csum16 is the RFC 1071 checksum, two bytes at a time: an independent
// check of lbRewrite's eight-byte sum.
func csum16(chunks ...[]byte) uint16 {
	var s uint32
	for _, b := range chunks {
		for i := 0; i+1 < len(b); i += 2 {
			s += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			s += uint32(b[len(b)-1]) << 8
		}
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func TestLBRewrite(t *testing.T) {
	for _, size := range []int{64, 65, 577, 1514} {
		g, err := synth.New(synth.Config{FrameSize: size, Flows: 4, Queues: 1, Seed: 1}, func(synth.Flow) int { return 0 })
		if err != nil {
			t.Fatal(err)
		}
		for flow := range 4 {
			f := slices.Clone(g.Frame(flow))
			payload := slices.Clone(f[ethHdr+28:])
			if !lbRewrite(f, uint32(flow*7)) {
				t.Fatalf("%d-byte frame of flow %d refused", size, flow)
			}
			ip := f[ethHdr : ethHdr+20]
			be := backends[uint32(flow*7)%uint32(len(backends))]
			if [4]byte(ip[16:20]) != be.addr || binary.BigEndian.Uint16(f[ethHdr+22:]) != be.port {
				t.Fatalf("destination not rewritten to %v:%d", be.addr, be.port)
			}
			if c := csum16(ip); c != 0xffff {
				t.Fatalf("%d B: IPv4 header checksum does not verify (sum %#x)", size, c)
			}
			udp := f[ethHdr+20 : ethHdr+int(binary.BigEndian.Uint16(ip[2:]))]
			pseudo := append(slices.Clone(ip[12:20]), 0, protoUDP, byte(len(udp)>>8), byte(len(udp)))
			if c := csum16(pseudo, udp); c != 0xffff {
				t.Fatalf("%d B: UDP checksum does not verify (sum %#x)", size, c)
			}
			if !slices.Equal(payload, f[ethHdr+28:]) {
				t.Fatal("the payload changed")
			}
		}
	}
	bad := make([]byte, 100)
	binary.BigEndian.PutUint16(bad[12:], 0x86dd) // IPv6
	if lbRewrite(bad, 0) || lbRewrite(bad[:20], 0) {
		t.Fatal("a non-IPv4/UDP frame was rewritten")
	}
}

// TestSweepSmoke runs the whole experiment at two tiny sizes and checks
// what it writes: every column of the CSV, per model and mode, with values
// that make sense.
func TestSweepSmoke(t *testing.T) {
	out := t.TempDir() + "/c"
	o := options{out: out, queues: 4, frame: 1514, l3: 32 << 20, paced: 0.5, smoke: true}
	o.sizes, o.reps, o.warm, o.dur, o.probeMax = []int{64, 128}, 1, 20e6, 60e6, 256<<10
	if err := sweep(o); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(recs[0], header) {
		t.Fatalf("header %v, want %v", recs[0], header)
	}
	if len(recs) != 1+2*2*2 {
		t.Fatalf("%d rows, want 8 (2 modes × 2 models × 2 sizes)", len(recs)-1)
	}
	col := func(r []string, name string) float64 {
		i := slices.Index(header, name)
		v, err := strconv.ParseFloat(r[i], 64)
		if err != nil {
			t.Fatalf("%s = %q: %v", name, r[i], err)
		}
		return v
	}
	for _, r := range recs[1:] {
		ring, ax := col(r, "ring"), col(r, "ax")
		want := ring
		if r[1] == "rxbisect" {
			want = ring / 8
		}
		if ax != want || col(r, "buffer_bytes") != 4*(want+slack)*bufSize {
			t.Errorf("%v: ax %v, buffer bytes %v", r[:3], ax, col(r, "buffer_bytes"))
		}
		if col(r, "mpps") <= 0 || col(r, "consumer_ns_per_pkt") <= 0 || col(r, "p99_us") < col(r, "p50_us") || col(r, "bad_frames") != 0 {
			t.Errorf("%v: implausible row %v", r[:3], r)
		}
		if ws := col(r, "io_working_set_bytes"); ws <= 0 || ws > col(r, "buffer_bytes") {
			t.Errorf("%v: I/O working set %v bytes of %v", r[:3], ws, col(r, "buffer_bytes"))
		}
	}
	pf, err := os.Open(out + "-probe.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	probe, err := csv.NewReader(pf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(probe) < 2 || !slices.Equal(probe[0], []string{"bytes", "load_ns", "copy_gbps"}) {
		t.Fatalf("probe CSV %v: want the header bytes,load_ns,copy_gbps and rows", probe)
	}
	for _, r := range probe[1:] {
		for _, v := range r {
			if x, err := strconv.ParseFloat(v, 64); err != nil || x <= 0 {
				t.Errorf("probe row %v: %q is not a positive number", r, v)
			}
		}
	}
	for _, name := range []string{"-probe.csv", "-machine.txt", ".svg", ".png"} {
		if st, err := os.Stat(out + name); err != nil || st.Size() == 0 {
			t.Errorf("%s%s not written: %v", out, name, err)
		}
	}
}
