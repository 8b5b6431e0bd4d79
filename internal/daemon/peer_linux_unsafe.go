//go:build linux

package daemon

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// peerGroups returns the supplementary groups the peer of the connected
// unix socket fd had when it connected (SO_PEERGROUPS, Linux 4.13+;
// unix.ENOPROTOOPT on an older kernel). unix.GetsockoptString cannot read
// them: it stops at the first zero byte, and gids have some.
func peerGroups(fd int) ([]uint32, error) {
	buf := make([]uint32, 32)
	for {
		n := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch {
		case e == 0:
			return buf[:n/4], nil
		case e == unix.ERANGE && int(n/4) > len(buf):
			buf = make([]uint32, n/4) // the kernel said how many
		default:
			return nil, e
		}
	}
}
