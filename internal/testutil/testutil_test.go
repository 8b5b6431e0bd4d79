package testutil_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.MainWithLeakCheck(m)) }

func TestSnapshotFindsLeaks(t *testing.T) {
	s := testutil.TakeSnapshot()
	if s.Goroutines < 1 {
		t.Fatalf("snapshot: %+v", s)
	}
	f, err := os.CreateTemp(t.TempDir(), "leak")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	for i := 0; i < 8; i++ { // several, so that a transient goroutine ending meanwhile cannot hide them
		go func() { <-stop }()
	}
	err = s.Leaks(50 * time.Millisecond)
	if err == nil {
		t.Fatal("no leak reported with an open file and an extra goroutine")
	}
	if s.FDs != nil && !strings.Contains(err.Error(), f.Name()) {
		t.Errorf("leak report does not name the open file %s: %v", f.Name(), err)
	}
	if !strings.Contains(err.Error(), "goroutine") {
		t.Errorf("leak report does not mention the goroutine: %v", err)
	}
	f.Close()
	close(stop)
	if err := s.Leaks(2 * time.Second); err != nil {
		t.Fatalf("leak reported after cleaning up: %v", err)
	}
}

func TestCheckLeaksClean(t *testing.T) {
	testutil.CheckLeaks(t)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
