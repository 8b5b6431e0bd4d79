package client

import (
	"os"

	"golang.org/x/sys/unix"
)

// platformSupported reports whether Attach can work here: on Linux it can.
func platformSupported() error { return nil }

// newCancelFD returns the eventfd (of this process only) that Wait polls
// beside the queue's socket, so that a cancelled context wakes it.
func newCancelFD() (int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, os.NewSyscallError("eventfd", err)
	}
	return fd, nil
}
