//go:build unix

package main

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// socketGroup names the group that owns the socket at path, or, when the
// socket cannot be examined (its directory is closed to us), the group of
// the nearest directory that can: the group a user must join. "" when
// neither is known.
func socketGroup(path string) string {
	for p := path; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				gid := strconv.FormatUint(uint64(st.Gid), 10)
				if g, err := user.LookupGroupId(gid); err == nil {
					return g.Name
				}
				return gid
			}
			return ""
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
}
