//go:build linux

package testbed

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Impair installs, on the egress of interface ifname in namespace ns, a
// clsact BPF program that drops lossPct percent of the frames and
// duplicates dupPct percent (without reordering or delay): the stand-in
// for netem on kernels without it. Every frame is subject to it — fast
// path, TCP control path and ARP alike. Deleting the namespace removes
// it.
func Impair(ns netns.NsHandle, ifname string, lossPct, dupPct int) error {
	if lossPct < 0 || dupPct < 0 || lossPct+dupPct > 100 {
		return fmt.Errorf("testbed: impair: loss %d%% and duplication %d%%: give percentages summing to at most 100", lossPct, dupPct)
	}
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("testbed: impair: %w", err)
	}
	defer nl.Close()
	link, err := nl.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("testbed: impair %s: %w", ifname, err)
	}
	ifindex := link.Attrs().Index
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL", Instructions: asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnGetPrandomU32.Call(),
		asm.Mod.Imm(asm.R0, 100),
		asm.JLT.Imm(asm.R0, int32(lossPct), "drop"),
		asm.JLT.Imm(asm.R0, int32(lossPct+dupPct), "dup"),
		asm.Mov.Imm(asm.R0, 0), // TC_ACT_OK
		asm.Return(),
		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("dup"),
		asm.Mov.Imm(asm.R2, int32(ifindex)),
		asm.Mov.Imm(asm.R3, 0), // egress of the same device: a copy goes out too
		asm.FnCloneRedirect.Call(),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 2).WithSymbol("drop"), // TC_ACT_SHOT
		asm.Return(),
	}})
	if err != nil {
		return fmt.Errorf("testbed: impair: loading the BPF program: %w", err)
	}
	defer prog.Close() // the filter keeps it
	if err := nl.QdiscAdd(&netlink.GenericQdisc{QdiscType: "clsact", QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}); err != nil {
		return fmt.Errorf("testbed: impair %s: clsact: %w", ifname, err)
	}
	if err := nl.FilterAdd(&netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_MIN_EGRESS,
		Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1}, Fd: prog.FD(), Name: "testbed-impair", DirectAction: true}); err != nil {
		return fmt.Errorf("testbed: impair %s: bpf egress filter: %w", ifname, err)
	}
	return nil
}
