package vnicd

import (
	"fmt"
	"net"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
)

// SocketGroup is the gid of the group that is to own the control socket
// (--socket-group), checked to be one this process may give a file to.
func SocketGroup(name string) (int, error) {
	grp, err := user.LookupGroup(name)
	if err != nil {
		return -1, fmt.Errorf("--socket-group %q: %w; create it (groupadd %s) or leave the flag out", name, err, name)
	}
	gid, _ := strconv.Atoi(grp.Gid)
	if !mayChownTo(gid) {
		return -1, fmt.Errorf("--socket-group %s: vnicd runs as uid %d, not root and not a member of %s, so it cannot give the socket to that group; run vnicd as root, or as a member of %s", name, os.Geteuid(), name, name)
	}
	return gid, nil
}

// mayChownTo reports whether this process may give a file it owns to group
// gid: with CAP_CHOWN (root has it) to any group, else only to a group it
// is a member of.
func mayChownTo(gid int) bool {
	if os.Geteuid() == 0 || os.Getegid() == gid || hasCapChown() {
		return true
	}
	groups, err := os.Getgroups()
	if err != nil {
		return true // let the chown decide
	}
	return slices.Contains(groups, gid)
}

// hasCapChown reports whether CAP_CHOWN (bit 0) is in the effective set
// that /proc/self/status shows; where it cannot be read, the chown
// itself decides.
func hasCapChown() bool {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return true
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err != nil || caps&1 != 0
		}
	}
	return true
}

// CheckMetricsAddr checks --metrics-addr's form (host:port, the host
// optional), as net.Listen will.
func CheckMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = fmt.Errorf("port %q is not a number from 0 to 65535", port)
		}
	}
	if err != nil {
		return fmt.Errorf("--metrics-addr %q: give host:port, e.g. 127.0.0.1:9464 or :9464 (or '' for no metrics)", addr)
	}
	return nil
}
