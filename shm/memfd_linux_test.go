package shm_test

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/ax"
	"github.com/vnic/vnic/bx"
	"github.com/vnic/vnic/counters"
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
