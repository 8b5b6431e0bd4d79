package casestudy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel"
)

// A star mesh (node 0 to every other, as the KV's) and a full one (as the
// shuffle's): every dialed connection arrives at its peer under the
// dialer's id and lane, and carries bytes.
func TestMeshes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	star := func(i int) []int {
		if i > 0 {
			return []int{0}
		}
		return []int{1, 2, 3}
	}
	for _, tc := range []struct {
		name  string
		peers func(int) []int
		pairs int
	}{{"star", star, 3}, {"full", nil, 6}} {
		t.Run(tc.name, func(t *testing.T) {
			const lanes = 2
			ms, err := Meshes(ctx, Loopback(4), lanes, tc.peers)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, m := range ms {
					m.Close()
				}
			}()
			pairs := 0
			for i, m := range ms {
				for p := range m.Out {
					for l, c := range m.Out[p] {
						if c == nil {
							continue
						}
						if l == 0 {
							pairs++
						}
						in := ms[p].In[i][l]
						if in == nil {
							t.Fatalf("node %d lane %d: dialed node %d, which has no connection from it", i, l, p)
						}
						msg := []byte{byte(i), byte(p), byte(l)}
						if _, err := c.Write(msg); err != nil {
							t.Fatal(err)
						}
						got := make([]byte, 3)
						in.SetReadDeadline(time.Now().Add(5 * time.Second))
						if _, err := io.ReadFull(in, got); err != nil || !slices.Equal(got, msg) {
							t.Fatalf("node %d -> %d lane %d: read %v, %v", i, p, l, got, err)
						}
					}
				}
			}
			if pairs != 2*tc.pairs { // each pair dials both ways
				t.Errorf("%d dialing pairs, want %d", pairs, tc.pairs)
			}
		})
	}
}

func TestFlagLists(t *testing.T) {
	if v, err := Ints("rows", "1, 20,300"); err != nil || !slices.Equal(v, []int{1, 20, 300}) {
		t.Errorf("Ints: %v %v", v, err)
	}
	if _, err := Ints("rows", "1,0"); err == nil {
		t.Error("Ints took 0")
	}
	if v, err := Floats("rates", "2000,5e3"); err != nil || !slices.Equal(v, []float64{2000, 5000}) {
		t.Errorf("Floats: %v %v", v, err)
	}
	if _, err := Choices("transport", "bi,udp", "bi", "tcp"); err == nil {
		t.Error("Choices took udp")
	}
}

func TestStartCPUProfile(t *testing.T) {
	stop, err := StartCPUProfile("")
	if err != nil {
		t.Fatal(err)
	}
	stop() // no profile: nothing to stop
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	if stop, err = StartCPUProfile(path); err != nil {
		t.Fatal(err)
	}
	stop()
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("profile %s: %v, %v", path, fi, err)
	}
	if _, err := StartCPUProfile(filepath.Join(t.TempDir(), "no", "such", "dir")); err == nil {
		t.Fatal("a profile in a missing directory was accepted")
	}
}

// Frames of 0 to 0xffff bytes arrive whole and in order; ReadFrames ends
// with nil when fn says stop or ctx ends between frames, and with an
// error when the connection ends inside one.
func TestFrames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msgs := [][]byte{{}, []byte("a"), bytes.Repeat([]byte("xyz"), 100), bytes.Repeat([]byte{7}, 0xffff), []byte("not read")}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		w := bufio.NewWriterSize(a, 4096)
		for _, m := range msgs {
			if err := WriteFrame(w, m); err != nil {
				return
			}
		}
		w.Flush()
	}()
	var got [][]byte
	err := ReadFrames(ctx, b, 1024, func(m []byte) bool {
		got = append(got, slices.Clone(m))
		return len(got) < 4
	})
	if err != nil || len(got) != 4 {
		t.Fatalf("read %d frames, %v; want 4, nil", len(got), err)
	}
	for i, m := range got {
		if !bytes.Equal(m, msgs[i]) {
			t.Errorf("frame %d: %d bytes, want %d", i, len(m), len(msgs[i]))
		}
	}

	// The end of ctx while waiting for a frame: nil.
	c, d := net.Pipe()
	defer c.Close()
	defer d.Close()
	cctx, ccancel := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, ccancel)
	if err := ReadFrames(cctx, d, 1024, func([]byte) bool { return true }); err != nil {
		t.Errorf("ctx ended between frames: %v, want nil", err)
	}

	// A frame cut short: an error.
	e, f := net.Pipe()
	defer f.Close()
	go func() {
		e.Write([]byte{0, 10, 1, 2, 3})
		e.Close()
	}()
	if err := ReadFrames(ctx, f, 1024, func([]byte) bool { return true }); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a frame cut short: %v, want %v", err, io.ErrUnexpectedEOF)
	}
}

func TestPlaces(t *testing.T) {
	ps, err := Places("", 3, bichannel.FastVNIC, 9000)
	if err != nil || len(ps) != 3 {
		t.Fatalf("loopback: %d places, %v", len(ps), err)
	}
	for i, p := range ps {
		if p.IP.String() != "127.0.0.1" || p.Listen != nil || p.VNIC.Socket != "" {
			t.Errorf("place %d: %+v, want plain loopback", i, p)
		}
	}
	if _, err := Places("zq9nx", 2, bichannel.FastUDP, 9000); err == nil {
		t.Error("a testbed that does not exist gave places")
	}
	if _, err := TestbedPlace("zq9nx", 2); err == nil {
		t.Error("a testbed host that does not exist gave a place")
	}
}
