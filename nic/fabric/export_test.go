package fabric

// Detached returns how many detached hosts' ledgers are not yet folded
// into the totals of the detached.
func (f *Fabric) Detached() int { return len(f.hosts.Load().left) }
