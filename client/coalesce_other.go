//go:build !linux

package client

import (
	"runtime"
	"time"
)

func nap(d time.Duration) { time.Sleep(d) }

func lockTimerSlack(time.Duration) (restore func()) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
