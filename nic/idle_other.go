//go:build !linux

package nic

import "time"

type idler struct{ waitable bool }

func newIdler(Source) (*idler, error)              { return nil, ErrNotSupported }
func (d *idler) close()                            {}
func (d *idler) addTenant(*Tenant)                 {}
func (d *idler) removeTenant(*Tenant)              {}
func (d *idler) kick()                             {}
func (d *idler) wait(time.Duration, *idleCounters) {}
func (t *Tenant) wakeQueue(int, uint32)            {}
func (d *idler) nap(time.Duration)                 {}

type signaller struct{}

func newSignaller([]*uint32, []int, *idleCounters) *signaller { return nil }
func (s *signaller) close()                                   {}
