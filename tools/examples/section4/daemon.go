package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/tools/internal/fabricd"
)

// daemon is a vnicd run --source fabric subprocess on a temporary socket.
type daemon struct {
	cmd    *exec.Cmd
	dir    string
	socket string
	log    *fabricd.Buffer
	done   chan error
}

// startDaemon runs bin as vnicd with the fabric source, its engine on
// engineCPU, frames of up to bufSize bytes, and the model flags given.
func startDaemon(bin string, engineCPU, bufSize int, model []string) (*daemon, error) {
	dir, err := os.MkdirTemp("", "section4-")
	if err != nil {
		return nil, fmt.Errorf("section4: temp dir: %w", err)
	}
	d := &daemon{dir: dir, socket: filepath.Join(dir, "vnicd.sock"), log: &fabricd.Buffer{}, done: make(chan error, 1)}
	args := append([]string{"run", "--source", "fabric", "--socket", d.socket, "--metrics-addr", "",
		"--emulator-cpu", fmt.Sprint(engineCPU), "--idle", "busy", "--rx-coalesce-usecs", "0",
		"--policy", "drop", "--buf-size", fmt.Sprint(bufSize), "--no-huge-pages", "--report", "0",
		"--log-format", "json", "--log-level", "warn"}, model...)
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	fabricd.DieWithParent(d.cmd)
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("section4: start vnicd: %w", err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := proto.Dial(d.socket)
		if err == nil {
			c.Close()
			return d, nil
		}
		select {
		case werr := <-d.done:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("section4: vnicd %s exited: %v\n%s", strings.Join(args, " "), werr, d.log.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("section4: vnicd did not open %s within 20s\n%s", d.socket, d.log.String())
		}
	}
}

// stop ends the subprocess (SIGINT, then SIGKILL after 5 s) and removes its files.
func (d *daemon) stop() {
	if d.cmd.Process != nil {
		d.cmd.Process.Signal(os.Interrupt)
		select {
		case <-d.done:
		case <-time.After(5 * time.Second):
			d.cmd.Process.Kill()
			<-d.done
		}
	}
	os.RemoveAll(d.dir)
}

// ledger is the fabric's ledger totals (vnicctl counters' source section)
// and the receiving tenants' engine drops.
type ledger struct {
	Sent, Delivered, Delayed uint64
	Drops                    map[string]uint64 // fabric drop columns (flow_limit, ...)
	// RxDrops are the engine's drops at the receivers (no buffer, Bx full).
	RxDrops uint64
}

// fabricDrops are the fabric's drop columns.
var fabricDrops = []string{"spoofed", "no_host", "flow_limit", "dpu_limit", "nic_cap", "loss", "delay_full"}

func (d *daemon) ledger() (ledger, error) {
	c, err := proto.Dial(d.socket)
	if err != nil {
		return ledger{}, fmt.Errorf("section4: stats: %w", err)
	}
	defer c.Close()
	c.Timeout = 5 * time.Second
	var st proto.Stats
	if _, err := c.Call(proto.TStats, nil, &st); err != nil {
		return ledger{}, fmt.Errorf("section4: stats: %w", err)
	}
	if st.Source == nil {
		return ledger{}, errors.New("section4: vnicd reported no fabric ledger; is it running --source fabric?")
	}
	l := ledger{Sent: st.Source["fabric_sent"], Delivered: st.Source["fabric_delivered"], Delayed: st.Source["fabric_delayed"], Drops: map[string]uint64{}}
	for _, r := range fabricDrops {
		l.Drops[r] = st.Source["fabric_"+r]
	}
	for _, t := range st.Tenants {
		for _, r := range t.Rings {
			l.RxDrops += r.NIC["drops_ax_starved"] + r.NIC["drops_bx_full"]
		}
	}
	return l, nil
}

// sub returns l - o, column by column.
func (l ledger) sub(o ledger) ledger {
	r := ledger{Sent: l.Sent - o.Sent, Delivered: l.Delivered - o.Delivered, Delayed: l.Delayed, RxDrops: l.RxDrops - o.RxDrops, Drops: map[string]uint64{}}
	for k, v := range l.Drops {
		r.Drops[k] = v - o.Drops[k]
	}
	return r
}

// dropped is the sum of the fabric's drop columns.
func (l ledger) dropped() uint64 {
	var s uint64
	for _, v := range l.Drops {
		s += v
	}
	return s
}

// balanced says whether sent = delivered + drops + delayed.
func (l ledger) balanced() bool { return l.Sent == l.Delivered+l.dropped()+l.Delayed }
