package bichannel

// The counters the insider tests read, one place each.

func unconfirmed(s Stats) uint64 { return s.HotAckUnconfirmed }
func hotAckOff(s Stats) uint64   { return s.HotAckOff }
func deadPeer(s Stats) uint64    { return s.DeadPeer }
