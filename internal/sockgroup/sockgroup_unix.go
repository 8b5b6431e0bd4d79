//go:build unix

// Package sockgroup names the group a user must join to reach vnicd's
// control socket, for the permission errors of the client library and
// vnicctl.
package sockgroup

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// Name names the group that owns the socket at path, or, when the socket
// cannot be examined (its directory is closed to us), the group of the
// nearest directory that can: the group a user must join. The gid when it
// has no name; "" when nothing is known.
func Name(path string) string {
	for p := path; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil {
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return ""
			}
			gid := strconv.FormatUint(uint64(st.Gid), 10)
			if g, err := user.LookupGroupId(gid); err == nil {
				return g.Name
			}
			return gid
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
}
