package bpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Objects are the loaded program and its maps. Close releases them; an
// attached link keeps the program alive until the link is closed too.
type Objects struct {
	// Program is vnic_xdp.
	Program *ebpf.Program
	// XSKs is vnic_xsks, the XSKMAP indexed by RX queue.
	XSKs *ebpf.Map
	// Config is vnic_cfg, the one entry of flags and claims (a hash map
	// without preallocation, so an update replaces the entry atomically).
	Config *ebpf.Map
	// Stats is vnic_stats, the per-CPU counters.
	Stats *ebpf.Map

	queues int
	frags  bool // loaded with Options.Frags
}

// Load creates the maps, writes opts.Config and loads the program. It needs
// CAP_BPF (and CAP_NET_ADMIN to attach); no kernel BTF is needed.
func Load(opts Options) (*Objects, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	spec, err := CollectionSpec(opts.Queues)
	if err != nil {
		return nil, err
	}
	if opts.Frags {
		spec.Programs[ProgramName].Flags |= unix.BPF_F_XDP_HAS_FRAGS
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("bpf: load %s: %w: run as root or grant CAP_BPF and CAP_NET_ADMIN", ProgramName, err)
		}
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("bpf: load %s: the verifier rejected the program (a bug in vnic, please report it): %+v", ProgramName, ve)
		}
		return nil, fmt.Errorf("bpf: load %s: %w", ProgramName, err)
	}
	o := &Objects{
		Program: coll.Programs[ProgramName],
		XSKs:    coll.Maps[XSKMapName],
		Config:  coll.Maps[ConfigName],
		Stats:   coll.Maps[StatsName],
		queues:  int(spec.Maps[XSKMapName].MaxEntries),
		frags:   opts.Frags,
	}
	if err := o.SetConfig(opts.Config); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// Queues is the XSKMAP size.
func (o *Objects) Queues() int { return o.queues }

// SetConfig replaces the claim configuration atomically: each frame is
// judged by the old or the new configuration as a whole, never a mix, and
// frames after SetConfig returns see the new one.
func (o *Objects) SetConfig(c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if err := o.Config.Put(uint32(0), c.value()); err != nil {
		return fmt.Errorf("bpf: write %s: %w", ConfigName, err)
	}
	return nil
}

// Register makes the program redirect frames of RX queue queue to the
// AF_XDP socket fd, which must be bound to that queue of the interface.
func (o *Objects) Register(queue, fd int) error {
	if queue < 0 || queue >= o.queues {
		return fmt.Errorf("bpf: register queue %d: %s holds queues 0 to %d: load with Options.Queues > %d", queue, XSKMapName, o.queues-1, queue)
	}
	if err := o.XSKs.Put(uint32(queue), uint32(fd)); err != nil {
		return fmt.Errorf("bpf: register socket %d for queue %d in %s: %w (is the socket bound?)", fd, queue, XSKMapName, err)
	}
	return nil
}

// Unregister removes queue's socket: its frames pass to the kernel again.
// Closing a socket unregisters it too.
func (o *Objects) Unregister(queue int) error {
	if queue < 0 || queue >= o.queues {
		return fmt.Errorf("bpf: unregister queue %d: out of range 0 to %d", queue, o.queues-1)
	}
	if err := o.XSKs.Delete(uint32(queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpf: unregister queue %d: %w", queue, err)
	}
	return nil
}

// Counters reads the program's counters, summed over CPUs.
func (o *Objects) Counters() (Counters, error) {
	var c Counters
	dst := []*uint64{&c.Redirected, &c.NoSocket, &c.ARP, &c.Unclaimed, &c.Short}
	var per []uint64
	for i, p := range dst {
		if err := o.Stats.Lookup(uint32(i), &per); err != nil {
			return Counters{}, fmt.Errorf("bpf: read %s[%d]: %w", StatsName, i, err)
		}
		for _, v := range per {
			*p += v
		}
	}
	return c, nil
}

// Close releases the program and maps. A link attached with Attach stays
// until it is closed.
func (o *Objects) Close() error {
	var errs []error
	for _, c := range []interface{ Close() error }{o.Program, o.XSKs, o.Config, o.Stats} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Inspect looks the interface up in the calling thread's network namespace.
func Inspect(ifindex int) (Interface, error) {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return Interface{}, fmt.Errorf("bpf: interface index %d: %w: it does not exist in this network namespace", ifindex, err)
	}
	a := l.Attrs()
	in := Interface{
		Name:     a.Name,
		Index:    a.Index,
		Kind:     l.Type(),
		MTU:      a.MTU,
		RXQueues: a.NumRxQueues,
		TXQueues: a.NumTxQueues,
	}
	if a.Xdp != nil && a.Xdp.Attached {
		in.XDPProgID = a.Xdp.ProgId
	}
	if n, ok := activeRXQueues(a.Name); ok && n < in.RXQueues {
		in.RXQueues = n // the queues in use, not the ones allocated
	}
	return in, nil
}

// Attach attaches the program to interface ifindex (in the calling thread's
// network namespace) through a BPF link, so nothing stays attached once the
// link is closed or the process dies. ModeAuto tries native mode and falls
// back to generic; the returned Mode says which one is in use and the caller
// should log it. Before attaching it checks that the interface exists, has
// no XDP program, has no more RX queues than the XSKMAP holds, and (native
// mode on veth) that its MTU is within VethNativeMaxMTU.
func (o *Objects) Attach(ifindex int, mode Mode) (link.Link, Mode, error) {
	if mode != ModeAuto && mode != ModeNative && mode != ModeGeneric {
		return nil, 0, fmt.Errorf("bpf: attach: unknown mode %v: use auto, native or generic", mode)
	}
	in, err := Inspect(ifindex)
	if err != nil {
		return nil, 0, err
	}
	if in.XDPProgID != 0 {
		return nil, 0, attachedError(in)
	}
	if in.RXQueues > o.queues {
		return nil, 0, fmt.Errorf("bpf: attach to %s: it has %d RX queues but %s holds %d: load with Options.Queues >= %d", in.Name, in.RXQueues, XSKMapName, o.queues, in.RXQueues)
	}
	mtuTooBig := in.Kind == "veth" && in.MTU > VethNativeMaxMTU && !o.frags // with frags veth takes any MTU
	var nativeErr error
	if mode == ModeNative || mode == ModeAuto {
		if mtuTooBig {
			nativeErr = fmt.Errorf("bpf: attach to %s in native mode: MTU %d is above what native XDP on veth accepts; lower it, use --xdp-mode generic, or load with Options.Frags (native XDP on veth takes an MTU up to %d without it)", in.Name, in.MTU, VethNativeMaxMTU)
		} else {
			l, err := o.attach(in, ModeNative)
			if err == nil {
				return l, ModeNative, nil
			}
			nativeErr = err
		}
		if mode == ModeNative {
			return nil, 0, nativeErr
		}
	}
	l, err := o.attach(in, ModeGeneric)
	if err != nil {
		if nativeErr != nil {
			return nil, 0, fmt.Errorf("%w; then %w", nativeErr, err)
		}
		return nil, 0, err
	}
	return l, ModeGeneric, nil
}

func (o *Objects) attach(in Interface, mode Mode) (link.Link, error) {
	flags := link.XDPGenericMode
	if mode == ModeNative {
		flags = link.XDPDriverMode
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: o.Program, Interface: in.Index, Flags: flags})
	if err == nil {
		return l, nil
	}
	prefix := fmt.Sprintf("bpf: attach %s to %s in %v mode", ProgramName, in.Name, mode)
	switch {
	case errors.Is(err, unix.ENOSPC) && in.Kind == "veth":
		return nil, fmt.Errorf("%s: %w: the XDP side needs at least as many RX queues as the peer has TX queues (%s has %d RX queues): recreate the pair with more RX queues here or fewer TX queues on the peer, or use --xdp-mode generic", prefix, err, in.Name, in.RXQueues)
	case errors.Is(err, unix.ERANGE) && in.Kind == "veth":
		return nil, fmt.Errorf("%s: %w: MTU %d (or the peer's MTU) is above what native XDP on veth accepts; lower it or use --xdp-mode generic", prefix, err, in.MTU)
	case errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST):
		if now, ierr := Inspect(in.Index); ierr == nil && now.XDPProgID != 0 {
			return nil, fmt.Errorf("%s: %w", prefix, attachedError(now))
		}
		return nil, fmt.Errorf("%s: %w: another XDP program is attached: see it with `xdp-loader status %s` or `ip -d link show dev %s`", prefix, err, in.Name, in.Name)
	case errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("%s: %w: run as root or grant CAP_NET_ADMIN and CAP_BPF", prefix, err)
	case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL):
		return nil, fmt.Errorf("%s: %w: the driver does not support this mode; use --xdp-mode generic", prefix, err)
	}
	return nil, fmt.Errorf("%s: %w", prefix, err)
}

// LinkOwner is a process holding a bpf_link to an XDP program.
type LinkOwner struct {
	PID  int
	Comm string // its command name, e.g. vnicd
}

// XDPLinkOwners returns the processes that hold a bpf_link to program
// progID, found through /proc/<pid>/fdinfo (the kernel prints prog_id for
// every bpf_link descriptor). Processes this one may not inspect are
// skipped.
func XDPLinkOwners(progID uint32) []LinkOwner {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := fmt.Sprintf("prog_id:\t%d\n", progID)
	var out []LinkOwner
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", p.Name())
		fds, err := os.ReadDir(filepath.Join(dir, "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
			if err != nil || target != "anon_inode:bpf_link" {
				continue
			}
			info, err := os.ReadFile(filepath.Join(dir, "fdinfo", fd.Name()))
			if err != nil || !strings.Contains(string(info), want) {
				continue
			}
			comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
			out = append(out, LinkOwner{PID: pid, Comm: strings.TrimSpace(string(comm))})
			break
		}
	}
	return out
}

// attachedError says who owns the XDP program already on in: a process
// holding its bpf_link (a live vnicd, say, which must be stopped: `ip link
// set ... xdp off` cannot remove a link), or nobody we can see.
func attachedError(in Interface) error {
	owners := XDPLinkOwners(in.XDPProgID)
	if len(owners) == 0 {
		return fmt.Errorf("bpf: attach to %s: XDP program %d%s is attached already, and no process this one can see holds it: see it with `xdp-loader status %s` (xdp-tools) or `ip -d link show dev %s`, and remove it with `xdp-loader unload %s --all` (libxdp's programs) or `ip link set dev %s xdp off`, or give this vnicd another --iface (vnicd cannot run as one program under libxdp's dispatcher, which needs kernel BTF; docs/operations.md)",
			in.Name, in.XDPProgID, progLabel(in.XDPProgID), in.Name, in.Name, in.Name, in.Name)
	}
	who := make([]string, len(owners))
	for i, o := range owners {
		who[i] = fmt.Sprintf("%s (pid %d)", o.Comm, o.PID)
	}
	o := owners[0]
	hint := fmt.Sprintf("stop it (kill %d", o.PID)
	if o.Comm == "vnicd" {
		hint += ", or systemctl stop vnicd if systemd runs it"
	}
	hint += ") or give this vnicd another --iface"
	return fmt.Errorf("bpf: attach to %s: XDP program %d is attached already through a bpf_link held by %s, which owns %s: %s", in.Name, in.XDPProgID, strings.Join(who, ", "), in.Name, hint)
}

// progLabel names program id for an error: " (NAME)", with libxdp's
// dispatcher said as such, or "" when the kernel does not tell.
func progLabel(id uint32) string {
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return ""
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil || info.Name == "" {
		return ""
	}
	if info.Name == "xdp_dispatcher" {
		return " (xdp_dispatcher, libxdp's dispatcher: xdp-loader or a libxdp application loaded it)"
	}
	return " (" + info.Name + ")"
}
