// Package pages asks the kernel for transparent huge pages (THP) for the
// memory vnicd touches per frame, faults that memory in, and reads the
// host's THP policies. On a VM a TLB miss walks two levels of page tables,
// and with 4 KiB pages the engine meets one for nearly every frame
// (docs/operations.md, "Huge pages").
// Everything here is best effort: memory the kernel keeps in small pages
// works as before.
package pages

import (
	"os"
	"strings"
)

// HugeSize is the size of a transparent huge page on x86-64 and arm64
// with 4 KiB base pages.
const HugeSize = 2 << 20

// policyOf returns the bracketed word of a THP policy file's content
// ("always [madvise] never" → "madvise"), or "" if there is none.
func policyOf(s string) string {
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return ""
	}
	return s[i+1 : j]
}

// ShmemAllows reports whether a shmem THP policy (ShmemTHP) lets a
// mapping that advises huge pages get them.
func ShmemAllows(policy string) bool {
	switch policy {
	case "advise", "within_size", "always", "force":
		return true
	}
	return false
}

// Touch writes a zero into every page of b's capacity, so that the
// first touches of freshly allocated heap memory are paid now and not on
// a data path. Not Populate: MADV_POPULATE_WRITE on Go heap buffers left
// the shuffle's hosts spending twice the CPU (kernel TCP 5.6–5.9 against
// 2.7–2.8 CPU-s per GB, interleaved), as if the pages were faulted again
// when first written.
func Touch(b []byte) {
	b = b[:cap(b)]
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 0
	}
}
