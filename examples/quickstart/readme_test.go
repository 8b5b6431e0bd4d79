package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goBlocks returns the ```go blocks of a Markdown file.
func goBlocks(md []byte) []string {
	var blocks []string
	var cur *strings.Builder
	for _, line := range strings.SplitAfter(string(md), "\n") {
		trim := strings.TrimSpace(line)
		switch {
		case cur == nil && trim == "```go":
			cur = &strings.Builder{}
		case cur != nil && trim == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	return blocks
}

// TestREADMEGoBlocksBuild extracts every Go block of the README and builds
// it as a program of this module; one of them must be this example,
// byte for byte.
func TestREADMEGoBlocksBuild(t *testing.T) {
	md, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(md)
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block")
	}
	self, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for i, b := range blocks {
		if b == string(self) {
			found = true
		}
		if !strings.HasPrefix(strings.TrimLeft(b, " \t\n"), "//") && !strings.HasPrefix(strings.TrimLeft(b, " \t\n"), "package ") {
			t.Errorf("README block %d is not a whole file (it must start with a comment or a package clause):\n%s", i, b)
			continue
		}
		dir, err := os.MkdirTemp(".", "readme-build-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("go", "vet", "./"+dir).CombinedOutput()
		if err != nil {
			t.Errorf("README block %d does not build: %v\n%s\n%s", i, err, out, b)
		}
		if f, err := exec.Command("gofmt", "-l", dir).CombinedOutput(); err == nil && len(bytes.TrimSpace(f)) != 0 {
			t.Errorf("README block %d is not gofmt'd", i)
		}
	}
	if !found {
		t.Error("no README block is examples/quickstart/main.go byte for byte: copy the file into the README's ```go block")
	}
}

// TestQuickstartWithoutVnicd: run as a user would with no vnicd, the
// example exits 1 with the client's advice, not a panic.
func TestQuickstartWithoutVnicd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "quickstart")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "VNIC_SOCKET="+filepath.Join(t.TempDir(), "none.sock"))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "vnicd is not running") || strings.Contains(string(out), "panic") {
		t.Fatalf("output:\n%s", out)
	}
}
