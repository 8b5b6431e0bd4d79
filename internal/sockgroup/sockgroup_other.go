//go:build !unix

// Package sockgroup names the group a user must join to reach vnicd's
// control socket, for the permission errors of the client library and
// vnicctl.
package sockgroup

// Name knows no group off Unix.
func Name(string) string { return "" }
