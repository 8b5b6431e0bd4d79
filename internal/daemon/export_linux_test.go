package daemon

// ConnCounts returns d's open control connections: the ordinary ones, and
// those on root's and on the admin group's reserves.
func ConnCounts(d *Daemon) (ordinary, root, admin int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ordinary, len(d.reserve[classRoot]), len(d.reserve[classAdmin])
}
