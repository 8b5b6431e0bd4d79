package futex

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The futex operations (linux/futex.h). Without FUTEX_PRIVATE_FLAG the
// word may be shared between processes; with it, the word is this
// process's own, hashed in the process's private futex table where the
// kernel has one (CONFIG_FUTEX_PRIVATE_HASH, Linux 6.16), which no other
// process can fill.
const (
	opWait      = 0
	opWake      = 1
	privateFlag = 128
)

// Wake wakes at most n waiters on the shared word at w and reports how
// many it woke. It is a raw system call (it never sleeps, and Go's runtime
// does not see it): for a thread that must not give up its P.
func Wake(w *uint32, n int) (int, error) {
	r, _, errno := unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), opWake, uintptr(n), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// WakeSyscall is Wake as an ordinary system call, for a thread that may
// spend long in it: the process that shares the word can make a wake spin
// on its hash bucket's lock for milliseconds (by requeueing thousands of
// waiters in a loop), and Go's runtime may then hand the caller's P on.
func WakeSyscall(w *uint32, n int) (int, error) {
	r, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), opWake, uintptr(n), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// WakePrivate wakes at most n waiters on the process-private word at w,
// with a raw system call.
func WakePrivate(w *uint32, n int) (int, error) {
	r, _, errno := unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), opWake|privateFlag, uintptr(n), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// Wait sleeps while the shared word at w holds val, until a Wake, a signal
// or timeout (none if timeout <= 0). It reports woken: false only when the
// timeout passed. A word that no longer holds val returns at once, woken.
func Wait(w *uint32, val uint32, timeout time.Duration) (woken bool, err error) {
	return wait(w, val, timeout, opWait)
}

// WaitPrivate is Wait on a process-private word.
func WaitPrivate(w *uint32, val uint32, timeout time.Duration) (woken bool, err error) {
	return wait(w, val, timeout, opWait|privateFlag)
}

func wait(w *uint32, val uint32, timeout time.Duration, op uintptr) (woken bool, err error) {
	if atomic.LoadUint32(w) != val {
		return true, nil
	}
	var tsp uintptr
	var ts unix.Timespec
	if timeout > 0 {
		ts = unix.NsecToTimespec(int64(timeout))
		tsp = uintptr(unsafe.Pointer(&ts))
	}
	_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), op, uintptr(val), tsp, 0, 0)
	switch errno {
	case 0, unix.EAGAIN, unix.EINTR:
		return true, nil
	case unix.ETIMEDOUT:
		return false, nil
	}
	return false, errno
}
