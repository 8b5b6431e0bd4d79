package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/vnic/vnic/bichannel"
	"github.com/vnic/vnic/bichannel/transport"
	"github.com/vnic/vnic/internal/proto"
)

// firstVNICPort is where pingpong starts looking for free ports on vnicd
// when -port is 0: above the registered range, below Linux's default
// ephemeral range (32768-60999 overlaps it, but vnicd claims only what
// its tenants ask for, so the kernel's sockets on other ports are not
// affected).
const firstVNICPort = 47100

// fastFabric is -fast fabric: the vnic fast path with each node a host of
// vnicd's emulated network (vnicd run --source fabric).
const fastFabric = "fabric"

// firstFabricHost is node 0's address on the fabric when -ip is not
// given; node i is the i-th address after it. 198.18.0.0/15 is for
// benchmarks (RFC 2544) and unicast, as the fabric requires.
var firstFabricHost = netip.AddrFrom4([4]byte{198, 18, 0, 1})

// fastPlan is the fast path one node asks bichannel for, and the line
// that says why.
type fastPlan struct {
	mode     bichannel.FastMode
	ip       netip.Addr // this node's fast-path address
	fabric   bool       // attach as a host of vnicd's fabric
	udpPort  uint16     // UDPConfig.BasePort (0: the kernel's choice)
	vnicPort uint16     // VNICConfig.BasePort
	why      string     // logged at info before the node is built
	err      error      // the reason vnicd is not used, logged with why
}

func (p fastPlan) log(lg *zerolog.Logger) {
	if p.why == "" {
		return
	}
	ev := lg.Info()
	if p.err != nil {
		ev = ev.Err(p.err)
	}
	ev.Msg(p.why)
}

// planFast chooses node's fast path and ports. node is 0 or 1 in one
// process (node 1's ports follow node 0's), 0 with -peer. For vnic and
// auto it asks vnicd which ports its tenants claim, since claims may not
// overlap.
func planFast(o options, node int) (fastPlan, error) {
	fab := o.fast == fastFabric
	name := o.fast
	if fab {
		name = "vnic"
	}
	mode, err := bichannel.ParseFastMode(name)
	if err != nil {
		return fastPlan{}, fmt.Errorf("%w (or fabric)", err)
	}
	ip, err := nodeIP(o, node)
	if err != nil {
		return fastPlan{}, err
	}
	local := o.peer == ""
	p := fastPlan{mode: mode, ip: ip, fabric: fab}
	if o.port != 0 {
		base := int(o.port) + node*o.workers
		if base+o.workers-1 > 0xffff {
			return p, fmt.Errorf("-port %d leaves no room for %d workers per node: give a lower -port", o.port, o.workers)
		}
		p.udpPort, p.vnicPort = uint16(base), uint16(base)
	}
	if mode == bichannel.FastUDP {
		return p, nil
	}
	st, ts, err := vnicdState(o.socket)
	if err != nil {
		if mode == bichannel.FastVNIC {
			// bichannel's attach fails with the same reason, as an error.
			if p.vnicPort == 0 {
				p.vnicPort = uint16(firstVNICPort + node*o.workers)
			}
			return p, nil
		}
		p.mode = bichannel.FastUDP
		p.why = fmt.Sprintf("vnicd not available at %s (-socket), using the kernel UDP fast path", o.socket)
		p.err = err
		return p, nil
	}
	if fab && st.Source != fastFabric {
		return p, fmt.Errorf("-fast fabric: vnicd at %s runs --source %s, not the emulated network: start it with vnicd run --source fabric", o.socket, st.Source)
	}
	if !fab && st.Source == fastFabric {
		if mode == bichannel.FastVNIC {
			return p, fmt.Errorf("-fast vnic: vnicd at %s runs --source fabric, whose tenants attach as hosts: use -fast fabric", o.socket)
		}
		p.mode = bichannel.FastUDP
		p.why = fmt.Sprintf("vnicd at %s runs --source fabric, whose tenants attach as hosts, so both nodes use the kernel UDP fast path: use -fast fabric to go through it", o.socket)
		return p, nil
	}
	if local && mode == bichannel.FastAuto && st.Source != "xsk:lo" {
		p.mode = bichannel.FastUDP
		p.why = fmt.Sprintf("vnicd at %s serves %s, whose frames never reach the other node in this process, so both nodes use the kernel UDP fast path: run one node per host with -peer to go through vnicd", o.socket, st.Source)
		return p, nil
	}
	if o.port != 0 {
		if t, ok := claimedBy(ts, p.vnicPort, o.workers, ip); ok {
			return p, fmt.Errorf("-port %d: ports %d-%d overlap the rule %s of vnicd tenant %d %q (pid %d): give another -port, or leave it 0 to take free ports",
				o.port, p.vnicPort, int(p.vnicPort)+o.workers-1, t.Match, t.ID, t.Name, t.PID)
		}
	} else {
		base, err := freePorts(ts, o.workers, ip)
		if err != nil {
			return p, err
		}
		p.vnicPort = base
	}
	p.why = fmt.Sprintf("vnicd at %s serves %s: this node claims UDP ports %d-%d", o.socket, st.Source, p.vnicPort, int(p.vnicPort)+o.workers-1)
	if fab {
		p.why = fmt.Sprintf("vnicd at %s serves the fabric: this node is host %v and claims UDP ports %d-%d", o.socket, ip, p.vnicPort, int(p.vnicPort)+o.workers-1)
	}
	return p, nil
}

// nodeIP is node's fast-path address: -ip, else 127.0.0.1. With -fast
// fabric each node is a host of its own: -ip, else firstFabricHost, is
// node 0's (with -peer, node -id's) and each next node takes the next
// address.
func nodeIP(o options, node int) (netip.Addr, error) {
	if o.fast != fastFabric {
		if o.ip == "" {
			return netip.AddrFrom4([4]byte{127, 0, 0, 1}), nil
		}
		ip, err := netip.ParseAddr(o.ip)
		if err != nil {
			return ip, fmt.Errorf("-ip %q: %w", o.ip, err)
		}
		return ip, nil
	}
	ip := firstFabricHost
	if o.ip != "" {
		var err error
		if ip, err = netip.ParseAddr(o.ip); err != nil {
			return ip, fmt.Errorf("-ip %q: %w", o.ip, err)
		}
		if o.peer != "" {
			return ip, nil
		}
	}
	if o.peer != "" {
		node = o.id
	}
	for range node {
		ip = ip.Next()
	}
	if !ip.Is4() {
		return ip, fmt.Errorf("-ip %q: a fabric host needs an IPv4 address", o.ip)
	}
	return ip, nil
}

// sameAs makes node 1's automatic choice node 0's result.
func sameAs(p fastPlan, e0 *bichannel.Endpoint) fastPlan {
	if _, ok := e0.FastPath().(*transport.VNIC); ok {
		p.mode = bichannel.FastVNIC
	} else {
		p.mode = bichannel.FastUDP
	}
	return p
}

// vnicdState asks vnicd for its status and its tenants.
func vnicdState(socket string) (proto.Status, []proto.TenantInfo, error) {
	var st proto.Status
	var ts proto.Tenants
	c, err := proto.Dial(socket)
	if err != nil {
		return st, nil, err
	}
	defer c.Close()
	if _, err := c.Call(proto.TStatus, nil, &st); err != nil {
		return st, nil, fmt.Errorf("vnicd status: %w", err)
	}
	if _, err := c.Call(proto.TTenants, nil, &ts); err != nil {
		return st, nil, fmt.Errorf("vnicd tenants: %w", err)
	}
	return st, ts.Tenants, nil
}

// claimedBy reports the tenant whose rule claims some UDP port of
// base..base+n-1 to ip, as vnicd's own overlap check does.
func claimedBy(ts []proto.TenantInfo, base uint16, n int, ip netip.Addr) (proto.TenantInfo, bool) {
	hi := int(base) + n - 1
	for _, t := range ts {
		m := t.Match
		if m.Proto != "" && m.Proto != "udp" {
			continue
		}
		if m.Dst != "" {
			if pfx, err := netip.ParsePrefix(m.Dst); err == nil && !pfx.Contains(ip.Unmap()) {
				continue
			}
		}
		anyPort := m.DstPortLo == 0 && m.DstPortHi == 0
		if anyPort && m.Dst == "" && m.Proto == "" {
			continue // the default rule: what no other rule claims
		}
		if anyPort || (int(m.DstPortLo) <= hi && int(m.DstPortHi) >= int(base)) {
			return t, true
		}
	}
	return proto.TenantInfo{}, false
}

// freePorts returns the first base from firstVNICPort up with n ports no
// tenant claims.
func freePorts(ts []proto.TenantInfo, n int, ip netip.Addr) (uint16, error) {
	for base := firstVNICPort; base+n-1 <= 0xffff; {
		t, ok := claimedBy(ts, uint16(base), n, ip)
		if !ok {
			return uint16(base), nil
		}
		if t.Match.DstPortHi == 0 {
			return 0, fmt.Errorf("vnicd tenant %d %q (pid %d) claims every UDP port to %v: give another -ip", t.ID, t.Name, t.PID, ip)
		}
		base = int(t.Match.DstPortHi) + 1
	}
	return 0, errors.New("vnicd's tenants claim every UDP port above 47100: give -port")
}

// fastName names a fast path for people: the transport, not a Go type.
// fabric says the vnicd path is vnicd's emulated network.
func fastName(fp transport.Path, fabric bool) string {
	switch fp.(type) {
	case *transport.VNIC:
		if fabric {
			return "vnicd's fabric (emulated network)"
		}
		return "vnicd (AF_XDP)"
	case *transport.UDP:
		return "kernel UDP"
	}
	if s, ok := fp.(fmt.Stringer); ok {
		return s.String()
	}
	return "custom"
}

// newLogger writes console lines to o.logOut, in colour only on a
// terminal and without NO_COLOR.
func newLogger(o options, id int) zerolog.Logger {
	level := zerolog.InfoLevel
	if o.verbose {
		level = zerolog.DebugLevel
	}
	_, noColor := os.LookupEnv("NO_COLOR")
	return zerolog.New(zerolog.ConsoleWriter{Out: o.logOut, TimeFormat: "15:04:05", NoColor: noColor || !isTerminal(o.logOut)}).
		Level(level).With().Timestamp().Int("node", id).Logger()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
