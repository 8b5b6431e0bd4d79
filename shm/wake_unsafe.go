package shm

import "unsafe"

// flagAt returns the uint32 at byte offset off of the region. The wake
// section is page-aligned in a page-aligned mapping (or a slice checked by
// Format/Open), so the word is aligned.
func (r *Region) flagAt(off uint64) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.Mem[off]))
}
