//go:build !linux

package vnicd

import (
	"errors"

	"github.com/vnic/vnic/xsk"
)

type wire struct {
	src    *xsk.Source
	claims *claimSet
	mode   string
	mtu    int
}

func (w *wire) Close()                   {}
func (w *wire) stats() map[string]uint64 { return nil }

func openWire(Config) (*wire, error) {
	return nil, errors.New("--source xsk needs Linux (XDP and AF_XDP)")
}
