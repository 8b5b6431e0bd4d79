package shm_test

import (
	"errors"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/pages"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/shm"
)

// The tests below create and map sealed memfds: Linux only.

func TestCreateMap(t *testing.T) {
	r, err := shm.Create(geo, shm.Options{Name: "vnic-test", Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	t.Logf("region of %d bytes, huge pages: %v", len(r.Mem), r.Huge)
	// The NIC side writes through its mapping; a client maps the memfd.
	axn, _ := ax.NewCore(r.AxMem(2), int(geo.AxSize))
	axn.Put(7)
	axn.Flush()
	r.Counters(shm.NICBlock, 3).Add(counters.Packets, 42)
	f := os.NewFile(uintptr(r.FD()), "memfd")
	c, err := shm.Map(f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nic, _ := ax.NewNIC(c.AxMem(2), int(geo.AxSize), geo.BufCount)
	if buf, _, ok, err := nic.Take(); !ok || err != nil || buf != 7 {
		t.Fatalf("client mapping sees buf %d ok %v err %v", buf, ok, err)
	}
	if v := c.Counters(shm.NICBlock, 3).Load(counters.Packets); v != 42 {
		t.Fatalf("counter through second mapping: %d", v)
	}
	if _, err := bx.NewCore(c.BxMem(0), int(geo.BxSize)); err != nil {
		t.Fatal(err)
	}
	// The memfd is sealed: a tenant cannot shrink it under vnicd.
	if err := unix.Ftruncate(r.FD(), 4096); !errors.Is(err, unix.EPERM) {
		t.Fatalf("shrinking the sealed memfd: %v, want EPERM", err)
	}
}

func TestCreateNoHuge(t *testing.T) {
	r, err := shm.Create(geo, shm.Options{NoHuge: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Huge {
		t.Fatal("NoHuge region reports huge pages")
	}
}

func TestMapRefusesUnsealed(t *testing.T) {
	fd, err := unix.MemfdCreate("vnic-unsealed", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create unavailable: %v", err)
	}
	f := os.NewFile(uintptr(fd), "memfd")
	defer f.Close()
	f.Truncate(int64(geo.Layout().Total))
	if _, err := shm.Map(f); !errors.Is(err, shm.ErrSize) {
		t.Fatalf("unsealed memfd: %v", err)
	}
}

// TestRegionHugePages: a region advises transparent huge pages for its
// whole 2 MiB pages, in vnicd's mapping and in a client's, and reports the
// host's policy. Whether the kernel follows depends on
// /sys/kernel/mm/transparent_hugepage/shmem_enabled, a host setting the
// test does not change.
func TestRegionHugePages(t *testing.T) {
	g := geo
	g.BufCount = 4096 // about 8.6 MiB of buffers
	r, err := shm.Create(g, shm.Options{NoHuge: true, Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f := os.NewFile(uintptr(r.FD()), "memfd")
	c, err := shm.Map(f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	policy, ok := pages.ShmemTHP()
	if !ok {
		t.Skipf("shmem THP is %q here: regions stay in 4 KiB pages (echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled lets them use 2 MiB pages); the region was created and mapped", policy)
	}
	for _, m := range []struct {
		who string
		mem []byte
	}{{"vnicd", r.Mem}, {"client", c.Mem}} {
		huge, err := testutil.SmapsField(uintptr(unsafe.Pointer(&m.mem[0])), "ShmemPmdMapped")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s's mapping of %d MiB: %d MiB mapped in huge pages", m.who, len(m.mem)>>20, huge>>20)
		if huge == 0 {
			t.Errorf("%s's mapping has no huge pages although shmem THP is %q", m.who, policy)
		}
	}
}
