package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
)

// Attach to a path where no vnicd listens says so and names the path, and
// no flag of vnicd's: the library knows only its own arguments (and reads
// no environment), but the examples read VNIC_SOCKET, which it mentions.
func TestAttachNotRunning(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "vnicd.sock")
	_, err := client.Attach(context.Background(), sock, client.AttachOptions{Name: "t"})
	if err == nil {
		t.Fatal("Attach succeeded with no vnicd")
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Attach: %v, want it to wrap os.ErrNotExist", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "client: vnicd is not running at "+sock) || strings.Contains(msg, "--") {
		t.Fatalf("message %q: want the path and no flag", msg)
	}
	if msg := err.Error(); !strings.Contains(msg, "set VNIC_SOCKET") {
		t.Errorf("message %q: want it to say the examples read VNIC_SOCKET", msg)
	}
}

// A cancelled context ends an attach that vnicd never answers, at once and
// with the context's error; a deadline is not needed.
func TestAttachCancelled(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "vnicd.sock")
	l, err := net.Listen("unixpacket", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // accept and never reply: a hung vnicd
		c, err := l.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err = client.Attach(ctx, sock, client.AttachOptions{Name: "t"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Attach: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Attach returned %v after the cancel, want at once", d)
	}
}

// An attach that vnicd never answers ends at ctx's deadline with
// context.DeadlineExceeded, not a bare socket timeout.
func TestAttachDeadline(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "vnicd.sock")
	l, err := net.Listen("unixpacket", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	for i := 0; i < 50; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
		_, err := client.Attach(ctx, sock, client.AttachOptions{Name: "t"})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("attempt %d: Attach: %v, want context.DeadlineExceeded", i, err)
		}
	}
}
