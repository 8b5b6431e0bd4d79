//go:build !linux

package testbed

import "errors"

// ErrNotSupported: network namespaces are Linux-only.
var ErrNotSupported = errors.New("testbed: network namespaces need Linux")

// Up is unavailable off Linux.
func Up(Config) (*Testbed, error) { return nil, ErrNotSupported }

// Down is unavailable off Linux.
func Down(Config) error { return ErrNotSupported }

// List returns nothing off Linux.
func List(string) []string { return nil }

// HostSockets needs Linux network namespaces.
func HostSockets(string, int) ([]Sockets, error) { return nil, ErrNotSupported }
