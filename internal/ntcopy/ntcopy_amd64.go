//go:build amd64 && !race

package ntcopy

import "unsafe"

// Available reports whether Frame writes with non-temporal stores here.
const Available = true

// Frame writes head followed by body into dst with non-temporal stores,
// and reports true; it reports false, having written nothing, when dst is
// not 16-byte aligned or has no room for the frame rounded up to 16 bytes
// (the bytes past the frame are garbage). The caller calls Fence before it
// publishes the frame.
func Frame(dst, head, body []byte) bool {
	n := len(head) + len(body)
	rounded := (n + 15) &^ 15
	if n == 0 || cap(dst) < rounded || uintptr(unsafe.Pointer(unsafe.SliceData(dst)))&15 != 0 {
		return false
	}
	dst = dst[:rounded]
	// The first line: the head and the start of the body, put together
	// where it is cheap, then written whole.
	var line [64]byte
	k := copy(line[:], head)
	if k < len(head) {
		return false // a head longer than a line: not a frame header
	}
	b := copy(line[k:], body)
	first := min(rounded, 64)
	copyNT(&dst[0], &line[0], first)
	body = body[b:]
	if len(body) == 0 {
		return true
	}
	// The rest of the body starts on a line boundary of dst.
	full := len(body) &^ 15
	if full > 0 {
		copyNT(&dst[64], &body[0], full)
	}
	if rem := len(body) - full; rem > 0 {
		var tail [16]byte
		copy(tail[:], body[full:])
		copyNT(&dst[64+full], &tail[0], 16)
	}
	return true
}

// Fence orders the non-temporal stores before it before every store after
// it (SFENCE).
func Fence() { sfence() }

// copyNT copies n bytes (a multiple of 16) from src to the 16-byte
// aligned dst with non-temporal stores.
//
//go:noescape
func copyNT(dst, src *byte, n int)

func sfence()
