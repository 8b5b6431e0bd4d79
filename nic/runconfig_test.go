package nic_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vnic/vnic/nic"
)

// runBriefly starts Run on an empty source, calls during once Run is
// active, and stops it.
func runBriefly(t *testing.T, eng *nic.Engine, during func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- eng.Run(ctx, nic.SourceFunc(func(dst [][]byte) ([][]byte, error) { return dst, nil }))
	}()
	select {
	case <-eng.Started():
	case err := <-errc:
		cancel()
		t.Fatalf("Run: %v", err)
	}
	during()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
}

// FoldEvery 0 folds after every Step until Run starts and every
// RunFoldEvery batches under Run; a value given is kept, under Run too.
func TestRunFoldEvery(t *testing.T) {
	for _, c := range []struct{ given, before, under int }{
		{0, 1, nic.RunFoldEvery},
		{1, 1, 1},
		{4, 4, 4},
	} {
		eng, err := nic.New(nic.Config{Model: nic.RxBisect, EmulatorCPU: -1, FoldEvery: c.given})
		if err != nil {
			t.Fatal(err)
		}
		if got := eng.Config().FoldEvery; got != c.before {
			t.Errorf("FoldEvery %d: %d before Run, want %d", c.given, got, c.before)
		}
		runBriefly(t, eng, func() {
			if got := eng.Config().FoldEvery; got != c.under {
				t.Errorf("FoldEvery %d: %d under Run, want %d", c.given, got, c.under)
			}
		})
	}
}

// An emulator CPU Run cannot pin to fails Run with a ConfigError that
// names the Config field (not a program's flag) and wraps the cause.
func TestRunConfigError(t *testing.T) {
	eng, err := nic.New(nic.Config{Model: nic.RxBisect, EmulatorCPU: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	err = eng.Run(context.Background(), nic.SourceFunc(func(dst [][]byte) ([][]byte, error) { return dst, nil }))
	var ce *nic.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Run: %v, want a *nic.ConfigError", err)
	}
	if ce.Field != "EmulatorCPU" || ce.Fix != "-1" || ce.Err == nil {
		t.Fatalf("ConfigError %+v, want Field EmulatorCPU, Fix -1 and a cause", *ce)
	}
	if msg := err.Error(); !strings.Contains(msg, "Config.EmulatorCPU to -1") || strings.Contains(msg, "--") {
		t.Fatalf("message %q: want it to name Config.EmulatorCPU and no flag", msg)
	}
	select {
	case <-eng.Started():
		t.Fatal("Started closed by a Run that failed to start")
	default:
	}
}
