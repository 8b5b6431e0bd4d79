//go:build linux

package bpf

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolChannels is struct ethtool_channels (ETHTOOL_GCHANNELS).
type ethtoolChannels struct {
	cmd                                         uint32
	maxRX, maxTX, maxOther, maxCombined         uint32
	rxCount, txCount, otherCount, combinedCount uint32
}

// ifreqData is struct ifreq with ifr_data, for SIOCETHTOOL.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// activeRXQueues returns the RX queues the interface uses now (ethtool's
// "current" RX plus combined channels), which can be fewer than the ones
// it was created with (IFLA_NUM_RX_QUEUES): a veth made without a queue
// count has as many as the machine has CPUs but uses one, and an AF_XDP
// socket cannot bind to a queue past the active ones. ok is false when
// the driver does not report its channels (the caller keeps the netlink
// figure). It asks in the calling thread's network namespace.
func activeRXQueues(name string) (n int, ok bool) {
	if len(name) >= unix.IFNAMSIZ {
		return 0, false
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	ch := ethtoolChannels{cmd: unix.ETHTOOL_GCHANNELS}
	var ifr ifreqData
	copy(ifr.name[:], name)
	ifr.data = unsafe.Pointer(&ch)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return 0, false
	}
	n = int(ch.rxCount + ch.combinedCount)
	return n, n > 0
}
