package casestudy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/internal/cpuacct"
	"github.com/vnic/vnic/tools/internal/fabricd"
)

// The -procs modes: every member a goroutine of this process, or each in
// a process of its own.
const (
	ProcsOne     = "one"
	ProcsPerHost = "per-host"
)

// Child is a cluster member in a process of its own: this binary run
// again with an environment variable holding the member's spec as JSON.
// The two talk in JSON lines, the parent on the child's stdin, the child
// on its stdout; the child dies with the parent (Pdeathsig, and its stdin
// closing).
type Child struct {
	Name   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan []byte
	exited chan struct{}
	err    error // Wait's, once exited is closed
	stderr *fabricd.Buffer

	mu     sync.Mutex
	final  time.Duration // CPU time read just before Kill
	killed bool
}

// StartChild starts this binary as a child with env=JSON(spec), on cpus
// (nil: where this process may run) and with this process's GOMAXPROCS
// (a child started on one CPU would otherwise get one P).
func StartChild(name, env string, spec any, cpus []int) (*Child, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: encode the spec: %w", name, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%s: find this binary: %w", name, err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env+"="+string(js), "GOMAXPROCS="+strconv.Itoa(runtime.GOMAXPROCS(0)))
	c := &Child{Name: name, cmd: cmd, lines: make(chan []byte, 16), exited: make(chan struct{}), stderr: &fabricd.Buffer{}}
	if c.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = c.stderr
	fabricd.DieWithParent(cmd)
	if cpus != nil {
		err = cpuacct.StartPinned(cmd, cpus)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<30)
		for sc.Scan() {
			c.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(c.lines)
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Send writes v to the child as a JSON line.
func (c *Child) Send(v any) error {
	js, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: encode a message: %w", c.Name, err)
	}
	if _, err := c.in.Write(append(js, '\n')); err != nil {
		return fmt.Errorf("%s (pid %d): send: %w", c.Name, c.Pid(), err)
	}
	return nil
}

// Recv reads the child's next JSON line into v, waiting at most timeout.
func (c *Child) Recv(v any, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l, ok := <-c.lines:
		if !ok {
			<-c.exited
			return fmt.Errorf("%s (pid %d) exited before it answered: %v: %s", c.Name, c.Pid(), c.err, strings.TrimSpace(c.stderr.String()))
		}
		if err := json.Unmarshal(l, v); err != nil {
			return fmt.Errorf("%s (pid %d) said %.200q: %w", c.Name, c.Pid(), l, err)
		}
		return nil
	case <-t.C:
		return fmt.Errorf("%s (pid %d) did not answer within %v: %s", c.Name, c.Pid(), timeout, strings.TrimSpace(c.stderr.String()))
	}
}

// CPU is the child's CPU time so far (schedstat, else /proc/<pid>/stat);
// once it exited, what it used up to its end (or up to Kill).
func (c *Child) CPU() (time.Duration, error) {
	select {
	case <-c.exited:
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.killed && c.cmd.ProcessState != nil {
			return c.cmd.ProcessState.UserTime() + c.cmd.ProcessState.SystemTime(), nil
		}
		return c.final, nil
	default:
	}
	if t, err := cpuacct.TaskCPU(c.Pid()); err == nil {
		return t, nil
	}
	return cpuacct.ProcessCPU(c.Pid())
}

// Kill ends the child with SIGKILL, by its pid, and waits for it; its
// CPU time up to then stays readable.
func (c *Child) Kill() {
	select {
	case <-c.exited:
		return
	default:
	}
	t, _ := c.CPU()
	c.mu.Lock()
	c.final, c.killed = t, true
	c.mu.Unlock()
	c.cmd.Process.Kill()
	c.in.Close()
	// Lines nobody will read must not hold the reader, which reaps the
	// child once its stdout ends.
	go func() {
		for range c.lines {
		}
	}()
	<-c.exited
}

// Close closes the child's stdin, which ends it, and waits up to timeout
// for it to exit; else kills it. The error is the child's failure, if
// any.
func (c *Child) Close(timeout time.Duration) error {
	c.in.Close()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.exited:
		if c.err != nil {
			return fmt.Errorf("%s (pid %d): %w: %s", c.Name, c.Pid(), c.err, strings.TrimSpace(c.stderr.String()))
		}
		return nil
	case <-t.C:
		c.Kill()
		return fmt.Errorf("%s (pid %d) did not exit within %v of its stdin closing; killed: %s", c.Name, c.Pid(), timeout, strings.TrimSpace(c.stderr.String()))
	}
}

// Children are a cluster's child processes.
type Children []*Child

// CPU is the sum of the children's CPU times (Child.CPU).
func (cs Children) CPU() (time.Duration, error) {
	var sum time.Duration
	for _, c := range cs {
		t, err := c.CPU()
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

// Kill kills every child still running (every exit path of the parent).
func (cs Children) Kill() {
	for _, c := range cs {
		if c != nil {
			c.Kill()
		}
	}
}

// Parent is a child's side of the pipe: JSON lines from stdin, to stdout.
type Parent struct {
	dec *json.Decoder
	enc *json.Encoder
}

// ParentPipe is this child's pipe to its parent.
func ParentPipe() *Parent {
	return &Parent{dec: json.NewDecoder(bufio.NewReader(os.Stdin)), enc: json.NewEncoder(os.Stdout)}
}

// Recv reads the parent's next message into v; io.EOF when the parent
// closed the pipe (or died).
func (p *Parent) Recv(v any) error {
	err := p.dec.Decode(v)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return io.EOF
	}
	return err
}

// Send writes v to the parent.
func (p *Parent) Send(v any) error { return p.enc.Encode(v) }

// MemberMain is the whole of a member process (a KV node, a shuffle host):
// it decodes its spec S from js (the JSON of the child's environment
// variable env), bounds its life by the spec's lifetime whatever the parent
// does (the parent also ends it by closing stdin, or by dying: Pdeathsig),
// and serves the parent over its pipe. It returns the exit status: 2 for a
// spec that does not decode, 1 for serve's error, 3 after the lifetime.
func MemberMain[S any](what, env, js string, meta func(*S) (id int, life time.Duration), serve func(S, *Parent) error) int {
	var s S
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s: %v\n", what, env, err)
		return 2
	}
	id, life := meta(&s)
	time.AfterFunc(life, func() {
		fmt.Fprintf(os.Stderr, "%s %d: still running after %v: exiting\n", what, id, life)
		os.Exit(3)
	})
	if err := serve(s, ParentPipe()); err != nil {
		fmt.Fprintf(os.Stderr, "%s %d: %v\n", what, id, err)
		return 1
	}
	return 0
}

// MemberPlaces is the places a member process knows of a cluster of n: its
// own, id's (in namespace PREFIX-h<id> of vnicctl testbed up if testbed is
// set, else on loopback; with the fast path's ip and vNIC configuration),
// and zero places for the others, whose addresses come from the parent.
func MemberPlaces(testbed string, id, n int, ip netip.Addr, vnic transport.VNICConfig) (Place, []Place, error) {
	var place Place
	if testbed != "" {
		var err error
		if place, err = TestbedPlace(testbed, id); err != nil {
			return place, nil, err
		}
	}
	place.IP, place.VNIC = ip, vnic
	places := make([]Place, n)
	places[id] = place
	return place, places, nil
}

// biPeers is the bi-channel peers ids at the addresses addrs gives them.
func biPeers(addrs []string, ids []int) []bichannel.Peer {
	peers := make([]bichannel.Peer, 0, len(ids))
	for _, j := range ids {
		peers = append(peers, bichannel.Peer{ID: j, Addr: addrs[j]})
	}
	return peers
}

// MemberNet is a member process's network to the other members while the
// cluster starts: a bi-channel Endpoint, or a TCP listener for a Mesh.
type MemberNet struct {
	EP    *bichannel.Endpoint // nil over TCP
	ln    net.Listener
	place Place
}

// ListenMember opens member id's network at places[id]: an Endpoint of
// workers built from bi, or, with bi nil, a TCP listener.
func ListenMember(places []Place, id, workers int, bi *bichannel.Config, fast bichannel.FastMode) (*MemberNet, error) {
	n := &MemberNet{place: places[id]}
	var err error
	if bi != nil {
		n.EP, err = NewEndpoint(EndpointsConfig{Places: places, Workers: workers, Template: *bi, Fast: fast}, id)
	} else if n.ln, err = n.place.ListenTCP(); err != nil {
		err = fmt.Errorf("listener: %w", err)
	}
	return n, err
}

// Addr is where the other members reach this one.
func (n *MemberNet) Addr() string {
	if n.EP != nil {
		return n.EP.ControlAddr()
	}
	return n.ln.Addr().String()
}

// Connect joins member id to its peers (nil: every other member) at addrs,
// every member's Addr: the Endpoint connects, or a Mesh of lanes
// connections per peer is made (nil with the Endpoint).
func (n *MemberNet) Connect(ctx context.Context, id, lanes int, addrs []string, peers func(node int) []int) (*Mesh, error) {
	if n.EP != nil {
		return nil, n.EP.Connect(ctx, biPeers(addrs, peersFunc(len(addrs), peers)(id)))
	}
	return ConnectMesh(ctx, id, lanes, addrs, peers, n.ln, n.place.Dial)
}

// Close closes the Endpoint or the listener, for a member that stops
// before a transport built on them takes them over.
func (n *MemberNet) Close() {
	if n.EP != nil {
		n.EP.Close()
	} else if n.ln != nil {
		n.ln.Close()
	}
}
