package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/vnic/vnic/internal/proto"
)

// VnicdOptions says how to run vnicd as a subprocess.
type VnicdOptions struct {
	// Bin is the binary; empty builds cmd/vnicd (Build).
	Bin string
	// Args are vnicd's arguments ("run", "--source", ...).
	Args []string
	// Netns, when set, runs vnicd in that named network namespace through
	// `ip netns exec`, which execs it: the process's pid is vnicd's.
	Netns string
	// Wrap, when set, is a command vnicd runs under (for example
	// sh -c 'ulimit -n 128; exec "$0" "$@"'); the binary and Args follow it.
	Wrap []string
	// Env is the process's environment (nil: this process's).
	Env []string
	// Log is the file vnicd's stdout and stderr go to (required).
	Log string
	// Socket is vnicd's control socket: vnicd is up once it accepts a
	// connection.
	Socket string
	// Ready, when set, says whether vnicd is up instead of Socket.
	Ready func() bool
	// Timeout bounds the wait for vnicd to come up (0: 5 s).
	Timeout time.Duration
	// StopSignal is what Stop sends first (nil: SIGINT); StopTimeout is how
	// long Stop waits for vnicd to exit before it kills it (0: 5 s).
	StopSignal  os.Signal
	StopTimeout time.Duration
}

// Vnicd is a vnicd subprocess. Its methods may be called from any
// goroutine.
type Vnicd struct {
	Cmd *exec.Cmd
	// Pid is the process's pid (vnicd's own, also under Netns).
	Pid int
	// LogPath is where its output goes.
	LogPath string

	o    VnicdOptions
	done chan struct{}
	once sync.Once
}

// StartVnicd starts vnicd and waits until it is up. When it does not come
// up in time or exits first, StartVnicd stops it and returns an error that
// holds its log.
func StartVnicd(o VnicdOptions) (*Vnicd, error) {
	if o.Log == "" {
		return nil, errors.New("testutil: StartVnicd needs a log file")
	}
	if o.Bin == "" {
		bin, err := Build(VnicdPkg)
		if err != nil {
			return nil, err
		}
		o.Bin = bin
	}
	args := append(append(append([]string(nil), o.Wrap...), o.Bin), o.Args...)
	if o.Netns != "" {
		args = append([]string{"ip", "netns", "exec", o.Netns}, args...)
	}
	logf, err := os.Create(o.Log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.Env = logf, logf, o.Env
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	v := &Vnicd{Cmd: cmd, Pid: cmd.Process.Pid, LogPath: o.Log, o: o, done: make(chan struct{})}
	go func() { cmd.Wait(); close(v.done) }()
	ready := o.Ready
	if ready == nil {
		ready = func() bool {
			c, err := proto.Dial(o.Socket)
			if err == nil {
				c.Close()
			}
			return err == nil
		}
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	for end := time.Now().Add(timeout); !ready(); {
		if v.Exited() {
			return nil, fmt.Errorf("vnicd exited before it came up:\n%s", v.Log())
		}
		if time.Now().After(end) {
			v.Stop()
			return nil, fmt.Errorf("vnicd did not come up within %v:\n%s", timeout, v.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return v, nil
}

// Stop stops vnicd (StopSignal, then SIGKILL after StopTimeout) and reaps
// it. Later calls do nothing.
func (v *Vnicd) Stop() {
	v.once.Do(func() {
		sig, wait := v.o.StopSignal, v.o.StopTimeout
		if sig == nil {
			sig = os.Interrupt
		}
		if wait == 0 {
			wait = 5 * time.Second
		}
		v.Cmd.Process.Signal(sig)
		select {
		case <-v.done:
		case <-time.After(wait):
			v.Cmd.Process.Kill()
			<-v.done
		}
	})
}

// Kill kills vnicd with SIGKILL and reaps it.
func (v *Vnicd) Kill() {
	v.once.Do(func() {
		v.Cmd.Process.Kill()
		<-v.done
	})
}

// Done is closed once vnicd has exited and been reaped.
func (v *Vnicd) Done() <-chan struct{} { return v.done }

// Exited says whether vnicd has exited.
func (v *Vnicd) Exited() bool {
	select {
	case <-v.done:
		return true
	default:
		return false
	}
}

// Log is vnicd's output so far.
func (v *Vnicd) Log() string {
	b, _ := os.ReadFile(v.LogPath)
	return string(b)
}

// LogTail is the last n lines of vnicd's output.
func (v *Vnicd) LogTail(n int) string { return Tail(v.Log(), n) }

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
