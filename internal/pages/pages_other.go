//go:build !linux

package pages

// THPPolicy returns "" off Linux.
func THPPolicy(string) string { return "" }

// ShmemTHP reports no THP off Linux.
func ShmemTHP() (string, bool) { return "", false }

// AdviseHuge does nothing off Linux.
func AdviseHuge([]byte) {}

// Populate does nothing off Linux.
func Populate([]byte) {}

// Map does nothing off Linux.
func Map([]byte) {}
