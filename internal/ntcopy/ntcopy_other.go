//go:build !amd64 || race

package ntcopy

// Available reports whether Frame writes with non-temporal stores here.
const Available = false

// Frame reports false: the caller copies as usual.
func Frame(dst, head, body []byte) bool { return false }

// Fence does nothing: Frame wrote nothing.
func Fence() {}
