package ring_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/ring"
)

// Two real processes share a memfd: the test binary re-executes itself as
// the consumer.

const (
	childEnv     = "VNIC_RING_CHILD"
	crossEntries = 10_000_000
	crossCap     = 1024
)

func TestCrossProcessPlain(t *testing.T) { crossProcess(t, "plain") }
func TestCrossProcessGen(t *testing.T)   { crossProcess(t, "gen") }

func crossProcess(t *testing.T, kind string) {
	esz := 8
	if kind == "gen" {
		esz = ring.GenEntrySize[genEntry]()
	}
	size := ring.Size(crossCap, esz)
	fd, err := unix.MemfdCreate("vnic-ring-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create not available on this kernel: %v", err)
	}
	f := os.NewFile(uintptr(fd), "memfd")
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if kind == "gen" {
		err = ring.InitGen[genEntry](mem, crossCap, nearWrap)
	} else {
		err = ring.Init[uint64](mem, crossCap, nearWrap)
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+kind, "VNIC_RING_SIZE="+strconv.Itoa(size))
	cmd.ExtraFiles = []*os.File{f}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fail := func(err error) { t.Error(err); cmd.Process.Kill() } // the consumer would wait for ever
	if kind == "gen" {
		p, err := ring.NewGenProducer[genEntry](mem, crossCap)
		if err != nil {
			t.Fatal(err)
		}
		produceGen(p, crossEntries, 7, fail)
	} else {
		p, err := ring.NewProducer[uint64](mem, crossCap)
		if err != nil {
			t.Fatal(err)
		}
		producePlain(p, crossEntries, 7, fail)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("consumer process: %v\n%s", err, out.String())
	}
	prod, cons, _ := ring.Cursors(mem)
	if cons != nearWrap+crossEntries {
		t.Fatalf("consumer cursor %d, want %d (prod %d)", cons, nearWrap+crossEntries, prod)
	}
	t.Logf("%s: %d entries across two processes, in order, none lost or duplicated", kind, crossEntries)
}

func TestMain(m *testing.M) {
	if kind := os.Getenv(childEnv); kind != "" {
		if err := crossChild(kind); err != nil {
			fmt.Fprintln(os.Stderr, "consumer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crossChild is the consumer half of TestCrossProcess*, run in the
// re-executed test binary with the memfd as fd 3.
func crossChild(kind string) error {
	size, _ := strconv.Atoi(os.Getenv("VNIC_RING_SIZE"))
	mem, err := unix.Mmap(3, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	if kind == "gen" {
		c, err := ring.NewGenConsumer[genEntry](mem, crossCap)
		if err != nil {
			return err
		}
		return consumeGen(c, crossEntries, 7)
	}
	c, err := ring.NewConsumer[uint64](mem, crossCap)
	if err != nil {
		return err
	}
	return consumePlain(c, crossEntries, 7)
}
