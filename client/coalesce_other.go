//go:build !linux

package client

import (
	"time"

	"golang.org/x/sys/unix"
)

func napOn(_ *uint32, _ uint32, d time.Duration) bool { time.Sleep(d); return false }

func napOnIRQ(_ int, _ *[1]unix.PollFd, _ []byte, d time.Duration) bool { time.Sleep(d); return false }
