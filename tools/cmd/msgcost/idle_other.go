//go:build !linux

package main

import "time"

// idleInterval samples, sleeps d and samples again.
func idleInterval(s sampler, d time.Duration) (c0, c1 cpuSnap, err error) {
	if c0, err = s.sample(); err != nil {
		return c0, c1, err
	}
	time.Sleep(d)
	c1, err = s.sample()
	return c0, c1, err
}
