//go:build !linux

package client

import "time"

func napOn(fd, cfd int, d time.Duration) bool { time.Sleep(d); return false }
