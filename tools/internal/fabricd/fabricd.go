// Package fabricd starts and stops vnicd run --source fabric for the
// benchmark programs and case studies: the emulated network their nodes
// attach to as hosts, on CPUs of its own.
package fabricd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/vnic/vnic/internal/cpuacct"
)

// Config starts one vnicd run --source fabric for a run's hosts:
// every node attaches to it as a host of the emulated network, and its
// engine (the emulated NIC) runs on CPUs.
type Config struct {
	// Vnicd is the vnicd binary ("": vnicd on PATH, else built once from
	// this module into a temporary directory, which needs the go tool).
	Vnicd string
	// CPUs is where vnicd runs, its engine on CPUs[0] (nil: unpinned).
	CPUs []int
	// Idle is vnicd's --idle: adaptive (the default) or busy.
	Idle string
	// Args are more vnicd run flags (e.g. --fabric-delay 20us).
	Args []string
}

// Fabric is a running vnicd --source fabric.
type Fabric struct {
	Socket string
	Pid    int
	cmd    *exec.Cmd
	dir    string
	done   chan error
	log    *Buffer
	once   sync.Once
	err    error
}

// Buffer keeps a child process's output, goroutine-safe, up to 1 MiB.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 {
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var built struct {
	once sync.Once
	path string
	dir  string // the temporary directory it was built in ("" for one on PATH)
	err  error
}

// Build builds vnicd from this module into dir (the go tool must be
// on PATH and the working directory inside the module) and returns its
// path.
func Build(dir string) (string, error) {
	p := filepath.Join(dir, "vnicd")
	out, err := exec.Command("go", "build", "-o", p, "github.com/vnic/vnic/cmd/vnicd").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("fabric: no vnicd on PATH, and go build of it failed (run from the repository, or give its path): %w: %s", err, out)
	}
	return p, nil
}

// Binary finds vnicd (on PATH) or builds it from this module once,
// into a temporary directory that RemoveBuild removes.
func Binary() (string, error) {
	built.once.Do(func() {
		if p, err := exec.LookPath("vnicd"); err == nil {
			built.path = p
			return
		}
		dir, err := os.MkdirTemp("", "vnicd-build-")
		if err != nil {
			built.err = fmt.Errorf("fabric: build vnicd: %w", err)
			return
		}
		built.dir = dir
		built.path, built.err = Build(dir)
	})
	return built.path, built.err
}

// RemoveBuild removes the vnicd Binary built, if it built one
// (call it once every Fabric is closed).
func RemoveBuild() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// Start starts vnicd run --source fabric on a socket of its own and
// waits until it accepts tenants.
func Start(ctx context.Context, c Config) (*Fabric, error) {
	bin := c.Vnicd
	if bin == "" {
		var err error
		if bin, err = Binary(); err != nil {
			return nil, err
		}
	}
	idle := c.Idle
	if idle == "" {
		idle = "adaptive"
	}
	if idle != "adaptive" && idle != "busy" {
		return nil, fmt.Errorf("fabric: idle %q: give adaptive or busy", idle)
	}
	dir, err := os.MkdirTemp("", "vnic-fabric-")
	if err != nil {
		return nil, fmt.Errorf("fabric: %w", err)
	}
	f := &Fabric{Socket: filepath.Join(dir, "vnicd.sock"), dir: dir, done: make(chan error, 1), log: &Buffer{}}
	ecpu := -1
	if len(c.CPUs) > 0 {
		ecpu = c.CPUs[0]
	}
	args := []string{"run", "--source", "fabric", "--socket", f.Socket, "--metrics-addr", "", "--report", "0",
		"--emulator-cpu", strconv.Itoa(ecpu), "--idle", idle, "--no-huge-pages",
		"--max-region", "1GiB", "--log-format", "json"}
	args = append(args, c.Args...)
	f.cmd = exec.Command(bin, args...)
	f.cmd.Stdout, f.cmd.Stderr = f.log, f.log
	DieWithParent(f.cmd)
	if len(c.CPUs) > 0 {
		err = cpuacct.StartPinned(f.cmd, c.CPUs)
	} else {
		err = f.cmd.Start()
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("fabric: start vnicd: %w", err)
	}
	f.Pid = f.cmd.Process.Pid
	go func() { f.done <- f.cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if conn, err := net.Dial("unixpacket", f.Socket); err == nil {
			conn.Close()
			return f, nil
		}
		select {
		case err := <-f.done:
			f.done <- err
			f.Close()
			return nil, fmt.Errorf("fabric: vnicd exited before it listened (%v): %s", err, f.log.String())
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("fabric: vnicd did not listen on %s within 20s: %s", f.Socket, f.log.String())
		}
	}
}

// Log is what vnicd wrote so far.
func (f *Fabric) Log() string { return f.log.String() }

// Close stops vnicd (SIGTERM, then SIGKILL after 5 s) and removes its
// socket's directory.
func (f *Fabric) Close() error {
	f.once.Do(func() {
		defer os.RemoveAll(f.dir)
		f.cmd.Process.Signal(syscall.SIGTERM)
		var err error
		select {
		case err = <-f.done:
		case <-time.After(5 * time.Second):
			f.cmd.Process.Kill()
			err = <-f.done
		}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			f.err = fmt.Errorf("fabric: vnicd: %w", err)
		}
	})
	return f.err
}

// HostIP is node i's address on the emulated network (198.18.0.0/15).
func HostIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 0, byte(i + 1)}) }
