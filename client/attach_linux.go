package client

import "github.com/vnic/vnic/internal/sockgroup"

// platformSupported reports whether Attach can work here: on Linux it can.
func platformSupported() error { return nil }

// socketGroup names the group a user must join to reach the socket at
// path (sockgroup.Name).
func socketGroup(path string) string { return sockgroup.Name(path) }
