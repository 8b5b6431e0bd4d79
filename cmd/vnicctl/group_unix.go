//go:build unix

package main

import "github.com/vnic/vnic/internal/sockgroup"

// socketGroup names the group a user must join to reach the socket at
// path (sockgroup.Name).
func socketGroup(path string) string { return sockgroup.Name(path) }
