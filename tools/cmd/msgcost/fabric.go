package main

import (
	"bytes"
	"context"
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
	"github.com/vnic/vnic/internal/testutil"
)

// The fabric is one vnicd run --source fabric for the whole run: each
// fabric trial attaches its two nodes to it as hosts 198.18.0.1 and
// 198.18.0.2 and detaches them at its end. It mirrors
// tools/examples/internal/casestudy (StartFabric, FabricHostIP), which
// is internal to tools/examples and so out of this command's reach.

// fabricBasePort is where every node's worker receives on the fabric.
const fabricBasePort = 9400

// fabricHostIP is node i's address on the emulated network (198.18.0.0/15).
func fabricHostIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 0, byte(i + 1)}) }

// vnicdBinary is -vnicd, else vnicd on PATH, else vnicd built from this
// module (go build, once; removeBuilt removes it).
func vnicdBinary(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if p, err := exec.LookPath("vnicd"); err == nil {
		return p, nil
	}
	p, err := testutil.Build(testutil.VnicdPkg)
	if err != nil {
		return "", fmt.Errorf("no vnicd on PATH and the build of it failed (run from the repository, or give -vnicd): %w", err)
	}
	return p, nil
}

func removeBuilt() { testutil.RemoveBuilt() }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fabric is a running vnicd --source fabric that this process started.
type fabric struct {
	socket string
	pid    int
	cmd    *exec.Cmd
	dir    string
	done   chan error
	log    *lockedBuffer
	once   sync.Once
}

// startFabric starts vnicd (bin) on a socket in a temporary directory of
// its own, its engine on cpus[0] and the process on cpus (nil: unpinned),
// and waits until it accepts tenants.
func startFabric(ctx context.Context, bin string, cpus []int, idle string, extra []string) (*fabric, error) {
	dir, err := os.MkdirTemp("", "msgcost-fabric-")
	if err != nil {
		return nil, err
	}
	f := &fabric{socket: filepath.Join(dir, "vnicd.sock"), dir: dir, done: make(chan error, 1), log: &lockedBuffer{}}
	ecpu := -1
	if len(cpus) > 0 {
		ecpu = cpus[0]
	}
	args := []string{"run", "--source", "fabric", "--socket", f.socket, "--metrics-addr", "", "--report", "0",
		"--emulator-cpu", strconv.Itoa(ecpu), "--idle", idle, "--no-huge-pages",
		"--max-region", "1GiB", "--log-format", "json"}
	f.cmd = exec.Command(bin, append(args, extra...)...)
	f.cmd.Stdout, f.cmd.Stderr = f.log, f.log
	dieWithParent(f.cmd)
	if len(cpus) > 0 {
		err = cpuacct.StartPinned(f.cmd, cpus)
	} else {
		err = f.cmd.Start()
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start vnicd: %w", err)
	}
	f.pid = f.cmd.Process.Pid
	go func() { f.done <- f.cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("unixpacket", f.socket); err == nil {
			c.Close()
			return f, nil
		}
		select {
		case err := <-f.done:
			f.done <- err
			f.close()
			return nil, fmt.Errorf("vnicd exited before it listened (%v): %s", err, f.log.String())
		case <-ctx.Done():
			f.close()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			f.close()
			return nil, fmt.Errorf("vnicd did not listen on %s within 20s: %s", f.socket, f.log.String())
		}
	}
}

// close stops vnicd (SIGTERM, SIGKILL after 5 s), by its pid, and removes
// its socket's directory.
func (f *fabric) close() {
	f.once.Do(func() {
		defer os.RemoveAll(f.dir)
		f.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-f.done:
			f.done <- err
		case <-time.After(5 * time.Second):
			f.cmd.Process.Kill()
		}
	})
}
