package bpf_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/internal/testutil"
)

// helperEnv makes the test binary a helper process that attaches the
// program and waits to be killed (TestIntegrationNoLeftovers).
const helperEnv = "VNIC_BPF_TEST_HELPER"

func TestMain(m *testing.M) {
	if arg := os.Getenv(helperEnv); arg != "" {
		os.Exit(runHelper(arg))
	}
	os.Exit(testutil.MainWithLeakCheck(m))
}

// runHelper joins netns arg[0], attaches the program natively to
// interface arg[1] through a BPF link, prints "ready", and then waits at
// most 30 s (the parent kills it long before).
func runHelper(arg string) int {
	f := strings.Fields(arg)
	if len(f) != 2 {
		fmt.Println("helper: want \"NETNS IFNAME\"")
		return 2
	}
	runtime.LockOSThread()
	ns, err := netns.GetFromName(f[0])
	if err == nil {
		err = netns.Set(ns)
	}
	if err != nil {
		fmt.Println("helper: netns:", err)
		return 1
	}
	l, err := netlink.LinkByName(f[1])
	if err != nil {
		fmt.Println("helper: link:", err)
		return 1
	}
	objs, err := bpf.Load(bpf.Options{})
	if err != nil {
		fmt.Println("helper:", err)
		return 1
	}
	if _, mode, err := objs.Attach(l.Attrs().Index, bpf.ModeNative); err != nil {
		fmt.Println("helper:", err)
		return 1
	} else {
		fmt.Println("ready", mode)
	}
	time.Sleep(30 * time.Second)
	return 0
}

// xdpState reports the XDP program attached to name in ns: its id and
// attach mode (1 driver, 2 generic), or 0, 0.
func xdpState(t *testing.T, ns *testutil.Netns, name string) (progID, mode uint32) {
	t.Helper()
	l, err := ns.Link(name)
	if err != nil {
		t.Fatal(err)
	}
	x := l.Attrs().Xdp
	if x == nil || !x.Attached {
		return 0, 0
	}
	return x.ProgId, x.AttachMode
}

func progID(t *testing.T, objs *bpf.Objects) uint32 {
	t.Helper()
	info, err := objs.Program.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, ok := info.ID()
	if !ok {
		t.Fatal("no program id")
	}
	return uint32(id)
}

func requirePrivileges(t *testing.T) {
	t.Helper()
	testutil.RequireNetAdmin(t)
	testutil.RequireBPF(t)
}

// pair creates a veth pair "vxa0" (XDP side) / "vxb0" with the given queues.
func pair(t *testing.T, queues int) (x, p *testutil.Netns, v *testutil.Veth) {
	t.Helper()
	x = testutil.NewNetns(t, "bpfx")
	p = testutil.NewNetns(t, "bpfp")
	v = testutil.VethPair(t, x, p, "vxa0", "vxb0", queues)
	return x, p, v
}

const (
	attachedDriver  = 1 // XDP_ATTACHED_DRV
	attachedGeneric = 2 // XDP_ATTACHED_SKB
)

// TestIntegrationAttachModes attaches in each mode, checks the mode the
// kernel reports against the one Attach returned, and the up-front checks.
func TestIntegrationAttachModes(t *testing.T) {
	requirePrivileges(t)
	testutil.CheckLeaks(t)
	x, _, v := pair(t, 2)
	objs, err := bpf.Load(bpf.Options{Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	id := progID(t, objs)
	for _, tc := range []struct {
		ask, want bpf.Mode
		kernel    uint32
	}{
		{bpf.ModeNative, bpf.ModeNative, attachedDriver},
		{bpf.ModeGeneric, bpf.ModeGeneric, attachedGeneric},
		{bpf.ModeAuto, bpf.ModeNative, attachedDriver},
	} {
		var l link.Link
		var got bpf.Mode
		err := x.Do(func() error {
			var err error
			l, got, err = objs.Attach(v.A.Index, tc.ask)
			return err
		})
		if err != nil {
			t.Fatalf("attach %v: %v", tc.ask, err)
		}
		if got != tc.want {
			t.Errorf("attach %v: got %v, want %v", tc.ask, got, tc.want)
		}
		if pid, mode := xdpState(t, x, v.A.Name); pid != id || mode != tc.kernel {
			t.Errorf("attach %v: kernel reports program %d in mode %d, want %d in mode %d", tc.ask, pid, mode, id, tc.kernel)
		}
		// A second attach is refused up front, saying what to do.
		err = x.Do(func() error {
			_, _, err := objs.Attach(v.A.Index, bpf.ModeAuto)
			return err
		})
		// It names this process, which holds the bpf_link, and does not
		// suggest ip link (which cannot remove a link).
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("(pid %d)", os.Getpid())) || strings.Contains(err.Error(), "xdp off") {
			t.Errorf("second attach: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if pid, _ := xdpState(t, x, v.A.Name); pid != 0 {
			t.Fatalf("program %d still attached after closing the link", pid)
		}
	}
	err = x.Do(func() error {
		_, _, err := objs.Attach(9999, bpf.ModeAuto)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("attach to a missing interface: %v", err)
	}
	small, err := bpf.Load(bpf.Options{Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	err = x.Do(func() error {
		_, _, err := small.Attach(v.A.Index, bpf.ModeAuto)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "Options.Queues >= 2") {
		t.Errorf("attach with a 1-entry XSKMAP to 2 queues: %v", err)
	}
	info := inspect(t, x, v.A.Index)
	if info.Kind != "veth" || info.RXQueues != 2 || info.TXQueues != 2 || info.MTU != 1500 || info.Name != v.A.Name {
		t.Errorf("Inspect: %+v", info)
	}
}

// TestIntegrationGenericFallback: with MTU 9000 native XDP on veth is
// refused up front with a message that says what to do, and ModeAuto falls
// back to generic mode and says so. It also pins VethNativeMaxMTU to the
// kernel's real limit.
func TestIntegrationGenericFallback(t *testing.T) {
	requirePrivileges(t)
	x, p, v := pair(t, 1)
	setMTU := func(mtu int) {
		t.Helper()
		for _, e := range []struct {
			ns   *testutil.Netns
			name string
		}{{x, v.A.Name}, {p, v.B.Name}} {
			l, err := e.ns.Link(e.name)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.ns.Netlink().LinkSetMTU(l, mtu); err != nil {
				t.Fatalf("set MTU %d on %s: %v", mtu, e.name, err)
			}
		}
	}
	objs, err := bpf.Load(bpf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	setMTU(9000)
	err = x.Do(func() error {
		_, _, err := objs.Attach(v.A.Index, bpf.ModeNative)
		return err
	})
	const msg = "MTU 9000 is above what native XDP on veth accepts; lower it, use --xdp-mode generic, or load with Options.Frags"
	if err == nil || !strings.Contains(err.Error(), msg) {
		t.Fatalf("native attach with MTU 9000: %v; want %q", err, msg)
	}
	t.Logf("native with MTU 9000: %v", err)
	var l link.Link
	var mode bpf.Mode
	if err := x.Do(func() error {
		var err error
		l, mode, err = objs.Attach(v.A.Index, bpf.ModeAuto)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if mode != bpf.ModeGeneric {
		t.Fatalf("auto with MTU 9000 chose %v, want generic", mode)
	}
	if _, m := xdpState(t, x, v.A.Name); m != attachedGeneric {
		t.Fatalf("kernel reports attach mode %d", m)
	}
	l.Close()

	// The kernel's own limit: native attach works at VethNativeMaxMTU and
	// fails with ERANGE one byte above (bypassing Attach's check).
	setMTU(bpf.VethNativeMaxMTU)
	if err := x.Do(func() error {
		var err error
		l, mode, err = objs.Attach(v.A.Index, bpf.ModeNative)
		return err
	}); err != nil {
		t.Fatalf("native attach at MTU %d: %v", bpf.VethNativeMaxMTU, err)
	}
	l.Close()
	setMTU(bpf.VethNativeMaxMTU + 1)
	err = x.Do(func() error {
		l, err := link.AttachXDP(link.XDPOptions{Program: objs.Program, Interface: v.A.Index, Flags: link.XDPDriverMode})
		if err == nil {
			l.Close()
		}
		return err
	})
	if !errors.Is(err, unix.ERANGE) {
		t.Fatalf("raw native attach at MTU %d: %v, want ERANGE: VethNativeMaxMTU does not match this kernel", bpf.VethNativeMaxMTU+1, err)
	}

	// Loaded with Frags (BPF_F_XDP_HAS_FRAGS), the program attaches
	// natively at MTU 9000: veth then takes frames of several pages.
	fobjs, err := bpf.Load(bpf.Options{Frags: true})
	if errors.Is(err, unix.EINVAL) {
		t.Skipf("skipping the frags part: this kernel refuses BPF_F_XDP_HAS_FRAGS (Linux 5.18+): %v", err)
	}
	if err != nil {
		t.Fatalf("load with frags: %v", err)
	}
	defer fobjs.Close()
	setMTU(9000)
	if err := x.Do(func() error {
		var err error
		l, mode, err = fobjs.Attach(v.A.Index, bpf.ModeAuto)
		return err
	}); err != nil {
		t.Fatalf("attach with frags at MTU 9000: %v", err)
	}
	defer l.Close()
	if _, m := xdpState(t, x, v.A.Name); mode != bpf.ModeNative || m == attachedGeneric {
		t.Fatalf("with frags at MTU 9000: mode %v (kernel %d), want native", mode, m)
	}
}

// TestIntegrationQueueMismatch: native XDP on a veth whose peer has more TX
// queues than it has RX queues fails with ENOSPC, explained.
func TestIntegrationQueueMismatch(t *testing.T) {
	requirePrivileges(t)
	x := testutil.NewNetns(t, "bpfq")
	p := testutil.NewNetns(t, "bpfr")
	const name = "vqa0"
	if err := x.Netlink().LinkAdd(&netlink.Veth{
		LinkAttrs:       netlink.LinkAttrs{Name: name, NumRxQueues: 1, NumTxQueues: 1},
		PeerName:        "vqb0",
		PeerNumTxQueues: 2,
		PeerNumRxQueues: 2,
		PeerNamespace:   netlink.NsFd(int(p.Handle)),
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l, err := x.Link(name); err == nil {
			x.Netlink().LinkDel(l)
		}
	})
	l, err := x.Link(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Netlink().LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	objs, err := bpf.Load(bpf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	err = x.Do(func() error {
		_, _, err := objs.Attach(l.Attrs().Index, bpf.ModeNative)
		return err
	})
	if !errors.Is(err, unix.ENOSPC) || !strings.Contains(err.Error(), "the XDP side needs at least as many RX queues as the peer has TX queues") {
		t.Fatalf("native attach with 1 RX queue against 2 peer TX queues: %v", err)
	}
	t.Logf("native with 1 RX queue vs 2 peer TX queues: %v", err)
	var mode bpf.Mode
	err = x.Do(func() error {
		var lk link.Link
		var err error
		lk, mode, err = objs.Attach(l.Attrs().Index, bpf.ModeAuto)
		if err == nil {
			lk.Close()
		}
		return err
	})
	if err != nil || mode != bpf.ModeGeneric {
		t.Fatalf("auto attach: %v, %v; want generic", mode, err)
	}
}

// TestIntegrationNoLeftovers: nothing stays attached after Close, nor
// after the owning process is killed with SIGKILL.
func TestIntegrationNoLeftovers(t *testing.T) {
	requirePrivileges(t)
	x, _, v := pair(t, 2)

	objs, err := bpf.Load(bpf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var l link.Link
	if err := x.Do(func() error {
		var err error
		l, _, err = objs.Attach(v.A.Index, bpf.ModeNative)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if id, _ := xdpState(t, x, v.A.Name); id == 0 {
		t.Fatal("nothing attached")
	}
	objs.Close() // the link keeps the program alive
	if id, _ := xdpState(t, x, v.A.Name); id == 0 {
		t.Fatal("closing the objects detached the program")
	}
	l.Close()
	if id, _ := xdpState(t, x, v.A.Name); id != 0 {
		t.Fatalf("program %d still attached after Close", id)
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+x.Name+" "+v.A.Name)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	lines := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	select {
	case line := <-lines:
		if !strings.HasPrefix(line, "ready") {
			t.Fatalf("helper: %s", line)
		}
		t.Logf("helper process %d: %s", cmd.Process.Pid, line)
	case <-time.After(10 * time.Second):
		t.Fatal("helper did not attach within 10 s")
	}
	if id, _ := xdpState(t, x, v.A.Name); id == 0 {
		t.Fatal("the helper's program is not attached")
	}
	if err := cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	cmd.Wait()
	for range lines {
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		id, _ := xdpState(t, x, v.A.Name)
		if id == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("program %d still attached 2 s after its owner was killed", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// inspect runs bpf.Inspect on interface index inside namespace ns.
func inspect(t *testing.T, ns *testutil.Netns, index int) bpf.Interface {
	t.Helper()
	var info bpf.Interface
	if err := ns.Do(func() error {
		var err error
		info, err = bpf.Inspect(index)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return info
}

// TestIntegrationInspectActiveQueues: Inspect reports the RX queues an
// interface uses now, not the ones it was created with: a veth made with
// 4 queues and set to 1 with `ethtool -L` has one, and an AF_XDP socket
// could not bind to queues 1 to 3 (a veth made without a queue count has
// one per CPU but uses one, the same case).
func TestIntegrationInspectActiveQueues(t *testing.T) {
	requirePrivileges(t)
	if _, err := exec.LookPath("ethtool"); err != nil {
		t.Skip("skipping: ethtool is not installed")
	}
	x, _, v := pair(t, 4)
	if got := inspect(t, x, v.A.Index).RXQueues; got != 4 {
		t.Fatalf("a veth with 4 RX queues: Inspect says %d", got)
	}
	if out, err := exec.Command("ip", "netns", "exec", x.Name, "ethtool", "-L", v.A.Name, "rx", "1", "tx", "1").CombinedOutput(); err != nil {
		if strings.Contains(string(out), "not supported") {
			t.Skipf("skipping: this kernel's veth cannot change its channels (Linux 5.13+): %s", out)
		}
		t.Fatalf("ethtool -L %s rx 1 tx 1: %v\n%s", v.A.Name, err, out)
	}
	if got := inspect(t, x, v.A.Index).RXQueues; got != 1 {
		t.Fatalf("after ethtool -L rx 1: Inspect says %d RX queues, want 1", got)
	}
}

// TestIntegrationOtherXDPProgram: with a program another tool attached
// through netlink (as `ip link set xdp` or libxdp does, with no bpf_link a
// process holds), Attach refuses with the program's id and name and the
// xdp-loader and ip commands that show and remove it.
func TestIntegrationOtherXDPProgram(t *testing.T) {
	requirePrivileges(t)
	x, _, _ := pair(t, 1)
	const name = "vxa0"
	other, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "xdp_dispatcher", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}, // XDP_PASS
	})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	l, err := x.Link(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Do(func() error { return netlink.LinkSetXdpFdWithFlags(l, other.FD(), 0) }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Do(func() error { return netlink.LinkSetXdpFd(l, -1) }) })
	id := progID(t, &bpf.Objects{Program: other})

	objs, err := bpf.Load(bpf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	var aerr error
	if err := x.Do(func() error {
		_, _, aerr = objs.Attach(l.Attrs().Index, bpf.ModeGeneric)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if aerr == nil {
		t.Fatal("Attach succeeded over another XDP program")
	}
	msg := aerr.Error()
	for _, want := range []string{
		fmt.Sprintf("XDP program %d (xdp_dispatcher, libxdp's dispatcher", id),
		"xdp-loader status " + name, "xdp-loader unload " + name + " --all", "ip link set dev " + name + " xdp off",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "bpftool") {
		t.Errorf("the refusal sends the user to bpftool, which is seldom installed:\n%s", msg)
	}
	if now, _ := xdpState(t, x, name); now != id {
		t.Errorf("the other program (id %d) was replaced by %d", id, now)
	}
}
