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

// AdminGroup resolves --admin-group, a group name or a numeric gid, to
// the gid whose members get a reserve of control connections; the group
// must exist in the host's group database.
func AdminGroup(g string) (uint32, error) {
	if _, err := strconv.ParseUint(g, 10, 32); err == nil {
		grp, err := user.LookupGroupId(g)
		if err != nil {
			return 0, fmt.Errorf("--admin-group %s: no group has gid %s here (%v); give an existing group's name or gid, or create it (groupadd -g %s NAME)", g, g, err, g)
		}
		return parseGID(grp.Gid)
	}
	grp, err := user.LookupGroup(g)
	if err != nil {
		return 0, fmt.Errorf("--admin-group %q: %w; give an existing group's name or gid, or create it (groupadd %s)", g, err, g)
	}
	return parseGID(grp.Gid)
}

func parseGID(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("the group database gives gid %q, which is not a number", s)
	}
	return uint32(n), nil
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
