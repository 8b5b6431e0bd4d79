//go:build linux

package vnicd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/vnic/vnic/bpf"
	"github.com/vnic/vnic/xsk"
)

// wire is a frame source and sink attached to a real interface.
type wire struct {
	src    *xsk.Source
	claims *claimSet
	objs   *bpf.Objects
	link   interface{ Close() error }
	mode   string
	mtu    int // the interface's
}

func (w *wire) Close() {
	if w.src != nil {
		w.src.Close()
	}
	if w.link != nil {
		w.link.Close()
	}
	if w.objs != nil {
		w.objs.Close()
	}
}

// stats returns the AF_XDP and XDP counters for vnicctl counters.
func (w *wire) stats() map[string]uint64 {
	out := map[string]uint64{}
	if s, err := w.src.Stats(); err == nil {
		out["xsk_rx_dropped"] = s.RxDropped
		out["xsk_rx_ring_full"] = s.RxRingFull
		out["xsk_rx_fill_ring_empty_descs"] = s.RxFillRingEmptyDescs
		out["xsk_tx_ring_empty_descs"] = s.TxRingEmptyDescs
		out["xsk_rx_invalid_descs"] = s.RxInvalidDescs
		out["xsk_tx_invalid_descs"] = s.TxInvalidDescs
		out["xsk_rx_frames"] = s.RxFrames
		out["xsk_tx_frames"] = s.TxFrames
		out["xsk_tx_completed"] = s.TxCompleted // chunks, not frames: a multi-buffer frame completes as several
		out["xsk_tx_kicks"] = s.TxKicks
		out["xsk_rx_too_long"] = s.RxTooLong // multi-buffer frames longer than the MTU allows, dropped
	}
	addXDPCounters(out, w.objs)
	return out
}

// addXDPCounters adds the XDP program's counters (the xdp_* lines of
// vnicctl counters) to out when they can be read.
func addXDPCounters(out map[string]uint64, objs *bpf.Objects) {
	if c, err := objs.Counters(); err == nil {
		out["xdp_redirected"] = c.Redirected
		out["xdp_pass_no_socket"] = c.NoSocket
		out["xdp_pass_arp"] = c.ARP
		out["xdp_pass_unclaimed"] = c.Unclaimed
		out["xdp_pass_short"] = c.Short
	}
}

// openWire loads the XDP program on --iface, attaches it (native first,
// then generic, unless --xdp-mode says otherwise) and opens one AF_XDP
// socket per RX queue.
func openWire(cfg Config) (*wire, error) {
	log := cfg.Log
	budget, err := cfg.latencyBudget()
	if err != nil {
		return nil, err
	}
	x, err := attachXDP(cfg, "--source xsk")
	if err != nil {
		return nil, err
	}
	name, info, got := x.name, x.info, x.mode
	w := &wire{objs: x.objs, link: x.link, claims: x.claims, mtu: info.MTU}
	queues := make([]int, max(info.RXQueues, 1))
	for i := range queues {
		queues[i] = i
	}
	sc := xsk.DefaultConfig()
	sc.TxSize = 2048
	chunk, fits := xskChunkFor(info.MTU)
	sc.ChunkSize = chunk
	mbps := linkMbps(name)
	sc.RxSize = cfg.XskRingSize
	if sc.RxSize == 0 {
		sc.RxSize = xskRingFor(linePPS(mbps), budget, len(queues), chunk)
	}
	if !fits {
		// Multi-buffer: the kernel spreads a longer frame over chunks
		// (the program was loaded with frags), xsk gathers it.
		sc.MaxFrame = maxFrameFor(info.MTU)
		if sc.MaxFrame < frameRoom(info.MTU) {
			log.Warn().Str("iface", name).Int("mtu", info.MTU).Msgf("frames longer than %d bytes are dropped (xsk_rx_too_long): AF_XDP takes a frame in at most %d chunks and 65,535 bytes; set the MTU to %d or less (ip link set %s mtu %d)", sc.MaxFrame, xsk.MaxFrags, sc.MaxFrame-l2Room, name, sc.MaxFrame-l2Room)
		}
	}
	w.src, err = xsk.NewSource(xsk.SourceConfig{Ifindex: x.index, Queues: queues, Socket: sc, Map: w.objs})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open AF_XDP sockets on %s: %w", name, err)
	}
	plural := "s"
	if len(queues) == 1 {
		plural = ""
	}
	w.mode = fmt.Sprintf("xdp %s, af_xdp %s, %d queue%s, MTU %d", got, w.src.Mode(), len(queues), plural, info.MTU)
	if sc.MaxFrame > 0 {
		w.mode += fmt.Sprintf(", multi-buffer: frames up to %d bytes in %d-byte chunks", sc.MaxFrame, sc.ChunkSize)
	}
	claim := x.claims.describe()
	log.Info().Str("iface", name).Str("xdp_mode", got.String()).Str("af_xdp_mode", fmt.Sprint(w.src.Mode())).
		Int("rx_queues", len(queues)).Int("mtu", info.MTU).Int("link_mbps", mbps).Int("xsk_ring_size", sc.RxSize).Int("umem_chunk", chunk).Bool("multi_buffer", !fits).Str("claims", claim).
		Msg("XDP program attached through a bpf_link; frames it does not claim pass to the kernel")
	if strings.Contains(got.String(), "generic") && len(queues) > 1 {
		log.Warn().Msg("generic XDP on veth reports every frame as RX queue 0: only queue 0's socket receives; the engine's own RSS still spreads frames over the tenants' queues")
	}
	return w, nil
}

// xdp is the XDP program loaded and attached on the --iface interface.
type xdp struct {
	name   string
	index  int
	info   bpf.Interface
	claims *claimSet
	objs   *bpf.Objects
	link   interface{ Close() error }
	mode   bpf.Mode
}

// attachXDP checks --iface, builds the claim configuration from the flags,
// loads vnic_xdp and attaches it (native first, then generic, unless
// --xdp-mode says otherwise). who names the flag that needed --iface.
func attachXDP(cfg Config, who string) (*xdp, error) {
	log := cfg.Log
	x := &xdp{name: cfg.Iface}
	if x.name == "" {
		return nil, fmt.Errorf("%s needs --iface; give the interface whose frames vnicd should take", who)
	}
	ifc, err := net.InterfaceByName(x.name)
	if err != nil {
		if strings.Contains(err.Error(), "no such network interface") {
			return nil, fmt.Errorf("--iface %s: this network namespace has no interface of that name; give one that ip link lists (run vnicd inside the interface's namespace: ip netns exec NS vnicd ...)", x.name)
		}
		return nil, fmt.Errorf("--iface %s: %w; list interfaces with ip link (inside the right network namespace)", x.name, err)
	}
	x.index = ifc.Index
	if x.info, err = bpf.Inspect(ifc.Index); err != nil {
		return nil, fmt.Errorf("--iface %s: %w", x.name, err)
	}
	mode, err := bpf.ParseMode(cfg.XDPMode)
	if err != nil {
		return nil, fmt.Errorf("--xdp-mode: %w", err)
	}
	base, err := cfg.Claims.base()
	if err != nil {
		return nil, err
	}
	if base.ClaimAll {
		log.Warn().Str("iface", x.name).Msg("--claim-all: vnicd takes every frame but ARP from this interface; the kernel gets no TCP, ICMP, neighbour discovery or DHCP on it, so the host loses it (use on a dedicated NIC or a test bed only)")
	}
	if x.objs, err = bpf.Load(bpf.Options{Queues: max(x.info.RXQueues, 1), Config: base, Frags: needsFrags(x.info.MTU)}); err != nil {
		if errors.Is(err, os.ErrPermission) {
			// The loader's own advice (and the library's, about
			// memlock) would repeat this one.
			return nil, fmt.Errorf("load the XDP program: %w: vnicd needs CAP_BPF and CAP_NET_ADMIN, so run it as root or with the systemd unit", os.ErrPermission)
		}
		return nil, fmt.Errorf("load the XDP program: %w; vnicd needs CAP_BPF and CAP_NET_ADMIN (run it as root or with the systemd unit)", err)
	}
	x.claims = newClaimSet(base, x.objs.SetConfig, log)
	if x.link, x.mode, err = x.objs.Attach(ifc.Index, mode); err != nil {
		x.objs.Close()
		return nil, err
	}
	return x, nil
}
