//go:build !linux

package client

import (
	"runtime"
	"time"
)

func napOn(fd, cfd int, d time.Duration) bool { time.Sleep(d); return false }

func lockTimerSlack(time.Duration) (restore func()) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
