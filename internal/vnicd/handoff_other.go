//go:build !linux

package vnicd

import (
	"errors"

	"github.com/vnic/vnic/nic"
)

type handoffWire struct {
	src    nic.HandoffSource
	claims *claimSet
	mode   string
	mtu    int
}

func (w *handoffWire) Close()                   {}
func (w *handoffWire) stats() map[string]uint64 { return nil }
func (w *handoffWire) attach(eng *nic.Engine, t *nic.Tenant) error {
	return errors.New("--handoff needs Linux")
}
func (w *handoffWire) detach(eng *nic.Engine, t *nic.Tenant) {}

func openHandoff(Config) (*handoffWire, error) {
	return nil, errors.New("--handoff needs Linux (XDP and AF_XDP)")
}
