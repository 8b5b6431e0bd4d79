//go:build !linux

package client

import (
	"runtime"
	"time"
)

func napOn(fd, cfd int, d time.Duration) bool { time.Sleep(d); return false }

func lockTimerSlack(time.Duration) (old int) {
	runtime.LockOSThread()
	return -1
}

func unlockTimerSlack(int) { runtime.UnlockOSThread() }
