//go:build !linux

package client

import "time"

func napOn(_ *uint32, _ uint32, d time.Duration) bool { time.Sleep(d); return false }
