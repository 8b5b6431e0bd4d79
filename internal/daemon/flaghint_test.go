//go:build linux

package daemon_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/nic"
)

// An emulator CPU the engine cannot pin to stops vnicd with a message that
// names vnicd's flag, not the library's Config field.
func TestRunNamesEmulatorFlag(t *testing.T) {
	cfg := daemon.Config{Socket: filepath.Join(t.TempDir(), "vnicd.sock"), SocketGroup: -1, SourceName: "test",
		Source: nic.SourceFunc(func(dst [][]byte) ([][]byte, error) { return dst, nil }),
		Engine: nic.Config{EmulatorCPU: 1 << 20}, Log: zerolog.New(io.Discard), AxSize: 512, BxSize: 1024, TxSize: 64, NoHugePages: true}
	d, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = d.Run(context.Background())
	if err == nil {
		t.Fatal("Run started an engine pinned to a CPU that does not exist")
	}
	msg := err.Error()
	if !strings.Contains(msg, "the emulated NIC did not start: nic: pin the emulator: ") || !strings.HasSuffix(msg, "; or use --emulator-cpu -1") || strings.Contains(msg, "Config.") {
		t.Fatalf("message %q: want the pin failure and the hint --emulator-cpu -1", msg)
	}
}

// FlagHint maps each field a nic.ConfigError can name to its flag, keeps
// the cause, and leaves other errors alone.
func TestFlagHint(t *testing.T) {
	cause := os.ErrPermission
	err := daemon.FlagHint(&nic.ConfigError{Op: "run the emulator under SCHED_IDLE", Field: "EmulatorIdlePriority", Fix: "false", Err: cause})
	if want := "nic: run the emulator under SCHED_IDLE: " + cause.Error() + "; or use --emulator-priority normal"; err.Error() != want {
		t.Fatalf("FlagHint: %q, want %q", err, want)
	}
	if !errors.Is(err, cause) {
		t.Fatal("FlagHint lost the cause")
	}
	if ce := (*nic.ConfigError)(nil); !errors.As(err, &ce) || ce.Field != "EmulatorIdlePriority" {
		t.Fatal("FlagHint hides the nic.ConfigError")
	}
	other := errors.New("source failed")
	if got := daemon.FlagHint(other); got != other {
		t.Fatalf("FlagHint(%v) = %v, want it unchanged", other, got)
	}
	if daemon.FlagHint(nil) != nil {
		t.Fatal("FlagHint(nil) is not nil")
	}
	unknown := &nic.ConfigError{Op: "x", Field: "NoSuchField", Fix: "0", Err: cause}
	if got := daemon.FlagHint(unknown); got != error(unknown) {
		t.Fatalf("FlagHint of an unmapped field: %v, want it unchanged", got)
	}
}
