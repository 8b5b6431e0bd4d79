package pages_test

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/pages"
	"github.com/vnic/vnic/internal/testutil"
)

// Map faults in a second, shared mapping of memory another mapping
// filled, page by page, and changes none of it.
func TestMapFaultsInWithoutWriting(t *testing.T) {
	const size = 64 << 12
	fd, err := unix.MemfdCreate("pages-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("skipping: memfd_create: %v", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	owner, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(owner)
	for i := range owner {
		owner[i] = byte(i * 7)
	}
	client, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(client)
	if rss := mappingRSS(t, client); rss != 0 {
		t.Fatalf("a fresh mapping already has %d bytes resident", rss)
	}
	pages.Map(client)
	if rss := mappingRSS(t, client); rss != size {
		t.Errorf("after Map, %d of %d bytes of the mapping are resident", rss, size)
	}
	for i := range client {
		if client[i] != byte(i*7) {
			t.Fatalf("byte %d changed to %d", i, client[i])
		}
	}
}

// mappingRSS is the Rss of the mapping that starts at mem.
func mappingRSS(t *testing.T, mem []byte) int64 {
	t.Helper()
	rss, err := testutil.SmapsField(uintptr(unsafe.Pointer(&mem[0])), "Rss")
	if err != nil {
		t.Fatal(err)
	}
	return rss
}
