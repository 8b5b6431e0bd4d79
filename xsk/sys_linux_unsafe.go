//go:build linux

package xsk

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// XDP socket options missing from older uapi headers.
const (
	// xdpMaxTxSkbBudget is XDP_MAX_TX_SKB_BUDGET (Linux 6.17): frames one
	// copy-mode sendto may transmit.
	xdpMaxTxSkbBudget = 9
	// xdpOptionsZeroCopy is XDP_OPTIONS_ZEROCOPY in struct xdp_options.
	xdpOptionsZeroCopy = 1
)

func getsockopt(fd, level, opt int, p unsafe.Pointer, size uintptr) error {
	n := uint32(size)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return os.NewSyscallError("getsockopt", e)
	}
	return nil
}

func setsockopt(fd, level, opt int, p unsafe.Pointer, size uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), size, 0)
	if e != 0 {
		return os.NewSyscallError("setsockopt", e)
	}
	return nil
}

// registerUMEM is setsockopt(XDP_UMEM_REG) over u's memory.
func registerUMEM(fd int, u *UMEM) error {
	reg := unix.XDPUmemReg{
		Addr: uint64(addrOf(u.mem)),
		Len:  uint64(len(u.mem)),
		Size: uint32(u.chunkSize),
	}
	if u.unaligned {
		reg.Flags = unix.XDP_UMEM_UNALIGNED_CHUNK_FLAG
	}
	return setsockopt(fd, unix.SOL_XDP, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg))
}

func mmapOffsets(fd int) (unix.XDPMmapOffsets, error) {
	var off unix.XDPMmapOffsets
	err := getsockopt(fd, unix.SOL_XDP, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off))
	return off, err
}

func xdpStatistics(fd int) (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	err := getsockopt(fd, unix.SOL_XDP, unix.XDP_STATISTICS, unsafe.Pointer(&st), unsafe.Sizeof(st))
	return st, err
}

func xdpOptions(fd int) (uint32, error) {
	var flags uint32
	err := getsockopt(fd, unix.SOL_XDP, unix.XDP_OPTIONS, unsafe.Pointer(&flags), unsafe.Sizeof(flags))
	return flags, err
}
