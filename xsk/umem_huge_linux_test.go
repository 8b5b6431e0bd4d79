package xsk_test

import (
	"testing"
	"unsafe"

	"github.com/vnic/vnic/internal/pages"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/xsk"
)

// TestUMEMHugePages: NewUMEM asks for transparent huge pages, so that the
// engine's per-frame access to a different chunk does not cost a TLB miss
// per frame (docs/operations.md, "Huge pages"), and the memory is still faulted
// in and zeroed.
func TestUMEMHugePages(t *testing.T) {
	const chunk, chunks = 2048, 4096 // 8 MiB: four 2 MiB pages at least partly
	u, err := xsk.NewUMEM(chunk, chunks)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	mem := u.Bytes()
	if len(mem) != chunk*chunks {
		t.Fatalf("UMEM of %d bytes, want %d", len(mem), chunk*chunks)
	}
	for i := 0; i < len(mem); i += 4096 {
		if mem[i] != 0 {
			t.Fatalf("byte %d of a new UMEM is %d, want 0", i, mem[i])
		}
	}
	switch p := pages.THPPolicy("enabled"); p {
	case "always", "madvise":
	default:
		t.Skipf("the kernel's anonymous THP policy is %q (need always or madvise): the UMEM cannot get huge pages here; the rest of the test passed", p)
	}
	huge, err := testutil.SmapsField(uintptr(unsafe.Pointer(&mem[0])), "AnonHugePages")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("UMEM of %d MiB: %d MiB in huge pages", len(mem)>>20, huge>>20)
	if huge == 0 {
		t.Fatal("the UMEM has no huge pages although THP is enabled for madvised memory")
	}
}
