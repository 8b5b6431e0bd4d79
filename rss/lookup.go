package rss

import (
	"fmt"
	"net/netip"
	"strings"
)

// Lookup describes one "which queue does this flow land on" question, as
// `vnicctl rss hash` asks it.
type Lookup struct {
	Key              Key // nil means MicrosoftKey
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	// Proto is "udp" or "tcp" (hash the addresses and ports) or "none"
	// (hash the addresses only). Empty means "udp".
	Proto    string
	RETASize int // 0 means DefaultRETASize
	Queues   int // at least 1
}

// Resolve computes the hash of the flow l describes, the RETA entry it selects
// and the queue it is steered to, with a RETA filled round-robin as NewRETA
// does.
func Resolve(l Lookup) (hash uint32, index, queue int, err error) {
	key := l.Key
	if key == nil {
		key = MicrosoftKey
	}
	h, err := NewHasher(key)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("resolve: %w", err)
	}
	var proto uint8
	switch strings.ToLower(l.Proto) {
	case "", "udp":
		proto = ProtoUDP
	case "tcp":
		proto = ProtoTCP
	case "none":
	default:
		return 0, 0, 0, fmt.Errorf("resolve: unknown protocol %q: use udp, tcp or none", l.Proto)
	}
	t, err := NewTuple(proto, l.Src, l.Dst, l.SrcPort, l.DstPort)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("resolve: %w", err)
	}
	size := l.RETASize
	if size == 0 {
		size = DefaultRETASize
	}
	r, err := NewRETA(size, l.Queues)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("resolve: %w", err)
	}
	hash = h.HashTuple(&t)
	return hash, r.Index(hash), r.Queue(hash), nil
}
