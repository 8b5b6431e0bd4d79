package futex

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The futex operations (linux/futex.h), without FUTEX_PRIVATE_FLAG: the
// word is shared between processes.
const (
	opWait = 0
	opWake = 1
)

// Wake wakes at most n waiters on the word at w and reports how many it
// woke. It is a raw system call (it never sleeps): the caller may be a
// locked, busy-polling thread.
func Wake(w *uint32, n int) (int, error) {
	r, _, errno := unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), opWake, uintptr(n), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// Wait sleeps while the word at w holds val, until a Wake, a signal or
// timeout (none if timeout <= 0). It reports woken: false only when the
// timeout passed. A word that no longer holds val returns at once, woken.
func Wait(w *uint32, val uint32, timeout time.Duration) (woken bool, err error) {
	if atomic.LoadUint32(w) != val {
		return true, nil
	}
	var tsp uintptr
	var ts unix.Timespec
	if timeout > 0 {
		ts = unix.NsecToTimespec(int64(timeout))
		tsp = uintptr(unsafe.Pointer(&ts))
	}
	_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), opWait, uintptr(val), tsp, 0, 0)
	switch errno {
	case 0, unix.EAGAIN, unix.EINTR:
		return true, nil
	case unix.ETIMEDOUT:
		return false, nil
	}
	return false, errno
}
