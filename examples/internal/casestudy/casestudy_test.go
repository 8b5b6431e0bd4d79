package casestudy

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
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
