//go:build linux

package nic

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSignalFullPipe: a wake into a receive-interrupt pipe that the
// tenant never reads returns at once without error once the pipe is full
// (a wake is pending there already), and one into a pipe whose read end
// the tenant closed fails (EPIPE), which the signaller counts as refused.
func TestSignalFullPipe(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	s := &signaller{signal: []*uint32{new(uint32)}, irq: []int{p[1]}}
	n := 0
	for ; n < 1<<20; n++ {
		var one [1]byte
		if _, err := unix.Write(p[1], one[:]); errors.Is(err, unix.EAGAIN) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if n == 0 || n == 1<<20 {
		t.Fatalf("wrote %d bytes before the pipe was full", n)
	}
	for i := 0; i < 3; i++ {
		if err := s.wake(0); err != nil {
			t.Fatalf("wake into a full pipe (%d bytes): %v; want none: a wake is pending there", n, err)
		}
	}
	unix.Close(p[0])
	if err := s.wake(0); !errors.Is(err, unix.EPIPE) {
		t.Fatalf("wake into a pipe without a reader: %v, want EPIPE", err)
	}
}
