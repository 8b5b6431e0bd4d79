package casestudy

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"testing"
	"time"
)

// byteConn is a net.Conn that reads r and ignores deadlines.
type byteConn struct {
	net.Conn
	r *bytes.Reader
}

func (c *byteConn) Read(b []byte) (int, error)      { return c.r.Read(b) }
func (c *byteConn) SetReadDeadline(time.Time) error { return nil }

// ReadFrames hands fn each frame that fits its buffer where it lies,
// with no allocation or copy per frame: reading 2000 frames allocates
// what reading 20 does.
func TestReadFramesInPlace(t *testing.T) {
	var stream bytes.Buffer
	w := bufio.NewWriter(&stream)
	msg := bytes.Repeat([]byte{5}, 1200)
	for range 2000 {
		WriteFrame(w, msg)
	}
	w.Flush()
	data := stream.Bytes()
	conn := &byteConn{}
	read := func(frames int) float64 {
		return testing.AllocsPerRun(5, func() {
			conn.r = bytes.NewReader(data)
			n := 0
			ReadFrames(context.Background(), conn, 32<<10, func(m []byte) bool {
				n++
				if len(m) != len(msg) || m[0] != 5 {
					t.Fatalf("frame %d: %d bytes", n, len(m))
				}
				return n < frames
			})
		})
	}
	if few, many := read(20), read(2000); many != few {
		t.Errorf("2000 frames: %v allocations, 20: %v", many, few)
	}
}

// WriteFrame allocates nothing.
func TestWriteFrameAllocatesNothing(t *testing.T) {
	w := bufio.NewWriterSize(discard{}, 4096)
	msg := make([]byte, 1200)
	if a := testing.AllocsPerRun(1000, func() { WriteFrame(w, msg) }); a != 0 {
		t.Errorf("%v allocations a frame", a)
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
