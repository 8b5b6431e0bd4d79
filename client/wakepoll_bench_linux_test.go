package client

import (
	"encoding/binary"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// wakeWriterEnv makes the test binary a pipe writer (see TestMain): it
// writes its CLOCK_MONOTONIC time, 8 bytes, into descriptor 3 every 2 ms,
// as many times as the variable says, as vnicd's signalling thread writes
// a queue's receive interrupt from another process.
const wakeWriterEnv = "VNIC_TEST_WAKE_WRITER"

func TestMain(m *testing.M) {
	if n, err := strconv.Atoi(os.Getenv(wakeWriterEnv)); err == nil {
		os.Exit(wakeWriter(n))
	}
	os.Exit(m.Run())
}

func wakeWriter(n int) int {
	w := os.NewFile(3, "wake")
	var b [8]byte
	for i := 0; i < n; i++ {
		time.Sleep(2 * time.Millisecond) // the reader is parked again
		binary.LittleEndian.PutUint64(b[:], uint64(monoNow()))
		if _, err := w.Write(b[:]); err != nil {
			return 1
		}
	}
	return 0
}

func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// BenchmarkWakeBesideBusyGoroutines measures what a Wait parked on its
// queue's receive interrupt pays to run again: a goroutine parks in Go's
// netpoller on a pipe, another process writes its clock into the pipe,
// and wake-to-run is the time until the goroutine has read it. With busy,
// GOMAXPROCS goroutines spin meanwhile (preemptible loops), so no P is
// idle and none blocks in the netpoller: the pipe's readiness waits for a
// P to look (a scheduling point, or Go's monitor thread, which polls the
// netpoller when nobody has for 10 ms). Each run writes b.N wakes.
// Run: go test -run '^$' -bench WakeBesideBusyGoroutines -benchtime 300x ./client
func BenchmarkWakeBesideBusyGoroutines(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Skip(err)
	}
	for _, busy := range []bool{false, true} {
		name := map[bool]string{false: "idle", true: "busy"}[busy]
		b.Run(name, func(b *testing.B) {
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
				b.Fatal(err)
			}
			r := os.NewFile(uintptr(p[0]), "wake-r")
			w := os.NewFile(uintptr(p[1]), "wake-w")
			defer r.Close()
			rc, err := r.SyscallConn()
			if err != nil {
				b.Fatal(err)
			}
			var stop atomic.Bool
			spinners := make(chan struct{})
			n := 0
			if busy {
				n = runtime.GOMAXPROCS(0)
			}
			for i := 0; i < n; i++ {
				go func() {
					for x := 0; !stop.Load(); x++ {
					}
					spinners <- struct{}{}
				}()
			}
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), wakeWriterEnv+"="+strconv.Itoa(b.N))
			cmd.ExtraFiles = []*os.File{w}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			w.Close()
			var buf [8]byte
			for len(lat) < b.N {
				got := 0
				err := rc.Read(func(fd uintptr) bool {
					k, err := unix.Read(int(fd), buf[got:])
					if err == unix.EAGAIN {
						return false
					}
					if k <= 0 {
						got = -1
						return true
					}
					got += k
					return got == len(buf)
				})
				if err != nil || got < 0 {
					b.Fatalf("read the wake: %v (the writer ended after %d)", err, len(lat))
				}
				lat = append(lat, time.Duration(monoNow()-int64(binary.LittleEndian.Uint64(buf[:]))))
			}
			b.StopTimer()
			stop.Store(true)
			for i := 0; i < n; i++ {
				<-spinners
			}
			if err := cmd.Wait(); err != nil {
				b.Fatalf("writer: %v", err)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
