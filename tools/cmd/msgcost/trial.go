package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vnic/vnic/internal/cpuacct"
)

// childEnv, set to a trial in JSON, makes this program node 1 of that
// trial (the per-node placement re-executes it): it prints "ready ADDR",
// reads "peer ADDR", connects, serves, and exits when its stdin closes.
const childEnv = "MSGCOST_NODE1"

// runner runs trials: where node 1's child goes, and vnicd's pid.
type runner struct {
	exe      string // this program, for the child
	hostCPUs []int  // the child's CPUs (nil: inherited)
	procs    int    // the child's GOMAXPROCS, as this process's
	vnicd    int
	env      []string // more environment for the child (tests)
}

// run measures one trial.
func (r *runner) run(t trial) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), t.Timeout)
	defer cancel()
	var res result
	var err error
	if t.Place == "per-node" {
		res, err = r.perNode(ctx, t)
	} else {
		res, err = r.oneProcess(ctx, t)
	}
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w after %v: %w", errTimeout, t.Timeout, err)
	}
	return res, err
}

// pair connects nodes a and b (their connects run at once: the
// bi-channel's handshake needs both ends).
func pair(ctx context.Context, a, b node) (link, link, error) {
	type lr struct {
		l   link
		err error
	}
	aAddr, bAddr := a.addr(), b.addr()
	ch := make(chan lr, 1)
	go func() { l, err := b.connect(ctx, aAddr); ch <- lr{l, err} }()
	la, errA := a.connect(ctx, bAddr)
	rb := <-ch
	return la, rb.l, errors.Join(errA, rb.err)
}

func (r *runner) oneProcess(ctx context.Context, t trial) (result, error) {
	n1, err := newNode(ctx, 1, t)
	if err != nil {
		return result{}, err
	}
	defer n1.close()
	n0, err := newNode(ctx, 0, t)
	if err != nil {
		return result{}, err
	}
	defer n0.close()
	l0, l1, err := pair(ctx, n0, n1)
	if err != nil {
		return result{}, err
	}
	errc := make(chan error, 1)
	go func() { errc <- serve(l1, t) }()
	res, err := drive(l0, t, sampler{selfID: os.Getpid(), vnicd: r.vnicdFor(t)})
	if err != nil {
		n0.close()
		n1.close()
		return res, errors.Join(err, <-errc)
	}
	return res, <-errc
}

func (r *runner) vnicdFor(t trial) int {
	if t.Path == "fabric" {
		return r.vnicd
	}
	return 0
}

func (r *runner) perNode(ctx context.Context, t trial) (result, error) {
	js, err := json.Marshal(t)
	if err != nil {
		return result{}, err
	}
	cmd := exec.Command(r.exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(js), "GOMAXPROCS="+strconv.Itoa(r.procs))
	cmd.Env = append(cmd.Env, r.env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return result{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	dieWithParent(cmd)
	if len(r.hostCPUs) > 0 {
		err = cpuacct.StartPinned(cmd, r.hostCPUs)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		return result{}, fmt.Errorf("node 1: start: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	finish := func() error {
		stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				return fmt.Errorf("node 1 (pid %d): %w: %s", cmd.Process.Pid, err, strings.TrimSpace(stderr.String()))
			}
			return nil
		case <-time.After(10 * time.Second):
			cmd.Process.Kill() // by its pid: the child this trial started
			<-exited
			return fmt.Errorf("node 1 (pid %d) did not exit within 10s of its stdin closing; killed: %s", cmd.Process.Pid, stderr.String())
		}
	}
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var peer string
	select {
	case l, ok := <-lines:
		if !ok || !strings.HasPrefix(l, "ready ") {
			return result{}, errors.Join(fmt.Errorf("node 1: said %q, want ready ADDR", l), finish())
		}
		peer = strings.TrimPrefix(l, "ready ")
	case <-ctx.Done():
		return result{}, errors.Join(fmt.Errorf("node 1: not ready: %w", ctx.Err()), finish())
	}
	n0, err := newNode(ctx, 0, t)
	if err != nil {
		return result{}, errors.Join(err, finish())
	}
	defer n0.close()
	if _, err := fmt.Fprintf(stdin, "peer %s\n", n0.addr()); err != nil {
		return result{}, errors.Join(err, finish())
	}
	l0, err := n0.connect(ctx, peer)
	if err != nil {
		return result{}, errors.Join(err, finish())
	}
	res, err := drive(l0, t, sampler{selfID: os.Getpid(), child: cmd.Process.Pid, vnicd: r.vnicdFor(t)})
	n0.close()
	return res, errors.Join(err, finish())
}

// childMain is node 1 in a process of its own.
func childMain(spec string) int {
	var t trial
	if err := json.Unmarshal([]byte(spec), &t); err != nil {
		fmt.Fprintf(os.Stderr, "msgcost node 1: %s: %v\n", childEnv, err)
		return 2
	}
	if err := child(t, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "msgcost node 1: %v\n", err)
		return 1
	}
	return 0
}

func child(t trial, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), t.Timeout)
	defer cancel()
	n1, err := newNode(ctx, 1, t)
	if err != nil {
		return err
	}
	defer n1.close()
	if _, err := fmt.Fprintf(out, "ready %s\n", n1.addr()); err != nil {
		return err
	}
	br := bufio.NewReader(in)
	line, err := br.ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the peer's address: %w", err)
	}
	peer, ok := strings.CutPrefix(strings.TrimSpace(line), "peer")
	peer = strings.TrimSpace(peer)
	if !ok {
		return fmt.Errorf("got %q, want peer ADDR", line)
	}
	l1, err := n1.connect(ctx, peer)
	if err != nil {
		return err
	}
	if err := serve(l1, t); err != nil {
		return err
	}
	// Stay up (node 0 may still need the done message resent) until the
	// runner closes stdin, or the trial's time is up.
	eof := make(chan struct{})
	go func() { io.Copy(io.Discard, br); close(eof) }()
	select {
	case <-eof:
	case <-ctx.Done():
	}
	return nil
}

// gomaxprocs is this process's GOMAXPROCS, which the child gets too: a
// child started on one CPU would otherwise get one P.
func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
