package daemon

import (
	"slices"
	"sync/atomic"
)

// The reserve (Limits.ReservedConns): control connections above
// --max-conns and --max-conns-per-uid, so the operator's vnicctl answers
// while others hold every ordinary connection. Who may use it is decided
// from the credentials the kernel recorded when the peer connected
// (SO_PEERCRED's effective uid and gid, SO_PEERGROUPS' supplementary
// groups), never from anything the peer says, and never from vnicd's own
// uid: a tenant may well run as the user vnicd runs as.
//
// Root (uid 0) and the members of Config.AdminGroup each have a reserve of
// their own, Limits.ReservedConns connections each, so no flood of the
// group's members reaches root's. A connection on a reserve serves
// commands, not tenants, and is closed once it sends nothing for
// Limits.FirstMessageTimeout. A connection of a class whose reserve is
// full takes the place of that reserve's connection that has gone longest
// without a request (the earliest admitted of equals), which is closed:
// one that keeps sending requests keeps its place only until a newer one
// of its class needs it. So root's vnicctl gets in at once whatever the
// other uids, the group's members or root's own ordinary connections hold;
// only root processes that open reserved connections faster than vnicctl
// sends its first request can keep pushing it out, and root may stop
// vnicd anyway.

// connClass is what a control connection's peer credentials entitle it to
// once the ordinary connections are taken.
type connClass uint8

const (
	classOrdinary connClass = iota // no reserve
	classAdmin                     // a member of Config.AdminGroup
	classRoot                      // uid 0
	numClasses
)

func (c connClass) String() string {
	switch c {
	case classAdmin:
		return "admin-group"
	case classRoot:
		return "root"
	}
	return "ordinary"
}

// classify returns the class of a peer of effective uid and gid and
// supplementary groups (nil: unknown, only gid counts); admin is
// --admin-group's gid (nil: none). Root is root whatever its groups.
func classify(uid, gid uint32, groups []uint32, admin *uint32) connClass {
	switch {
	case uid == 0:
		return classRoot
	case admin != nil && (gid == *admin || slices.Contains(groups, *admin)):
		return classAdmin
	}
	return classOrdinary
}

// connState is the daemon's record of an open control connection.
type connState struct {
	uid      uint32
	class    connClass
	reserved bool   // admitted on its class's reserve
	seq      uint64 // admission order
	// last is when it last sent a request, or was admitted (nanoseconds
	// on the daemon's monotonic clock); serve stores, admit reads.
	last atomic.Int64
}

// idlest returns the connection in set that has gone longest without a
// request, the earliest admitted of equals (the zero K for an empty set).
func idlest[K comparable](set map[K]*connState) K {
	var (
		pick K
		best *connState
	)
	for k, s := range set {
		if best == nil || s.last.Load() < best.last.Load() || s.last.Load() == best.last.Load() && s.seq < best.seq {
			pick, best = k, s
		}
	}
	return pick
}
