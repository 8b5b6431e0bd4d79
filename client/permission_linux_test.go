package client

import (
	"context"
	"errors"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPermissionErrorNamesGroup: the permission error names the socket's
// group (its name, or its gid when it has none) and how to join it; a
// socket that cannot be examined gives its nearest directory's group.
func TestPermissionErrorNamesGroup(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "vnicd.sock")
	if err := os.WriteFile(sock, nil, 0o660); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // gid to the name the message gives
	var gids []int
	if os.Getuid() == 0 {
		gids = append(gids, 0)
		unnamed := 59999
		for ; unnamed > 50000; unnamed-- {
			if _, err := user.LookupGroupId(strconv.Itoa(unnamed)); err != nil {
				break
			}
		}
		gids = append(gids, unnamed)
		want["0"] = "root"
		if g, err := user.LookupGroupId("0"); err == nil {
			want["0"] = g.Name
		}
		want[strconv.Itoa(unnamed)] = strconv.Itoa(unnamed)
	} else {
		gid := os.Getgid()
		gids = append(gids, gid)
		want[strconv.Itoa(gid)] = strconv.Itoa(gid)
		if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil {
			want[strconv.Itoa(gid)] = g.Name
		}
	}
	for _, gid := range gids {
		if os.Getuid() == 0 {
			if err := os.Chown(sock, -1, gid); err != nil {
				t.Fatal(err)
			}
		}
		g := want[strconv.Itoa(gid)]
		for _, path := range []string{sock, filepath.Join(dir, "absent", "vnicd.sock")} {
			if path != sock && os.Getuid() == 0 {
				os.Chown(dir, -1, gid)
			}
			msg := permissionError(path, os.ErrPermission).Error()
			if !strings.Contains(msg, "join its group "+g+" (sudo usermod -aG "+g+" $USER, then log in again)") {
				t.Errorf("gid %d, %s: %q, want the group %s and how to join it", gid, path, msg, g)
			}
			if strings.Count(msg, ";") != 1 || strings.Contains(msg, "\n") {
				t.Errorf("not one sentence: %q", msg)
			}
		}
	}
}

// TestAttachPermissionDenied: Attach to a socket the user may not write
// says so with the socket's group (only without root, which may write
// anything).
func TestAttachPermissionDenied(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root may connect to any socket")
	}
	sock := filepath.Join(t.TempDir(), "vnicd.sock")
	l, err := net.Listen("unixpacket", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Chmod(sock, 0); err != nil {
		t.Fatal(err)
	}
	_, err = Attach(context.Background(), sock, AttachOptions{Name: "t"})
	if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), "join its group ") || !strings.Contains(err.Error(), "usermod -aG") {
		t.Fatalf("Attach: %v, want a permission error naming the group", err)
	}
}
