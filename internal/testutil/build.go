package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

// The commands the integration tests run as subprocesses.
const (
	VnicdPkg   = "github.com/vnic/vnic/cmd/vnicd"
	VnicctlPkg = "github.com/vnic/vnic/cmd/vnicctl"
)

var (
	buildMu  sync.Mutex
	buildDir string
	builds   = map[string]*buildResult{}
)

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// Build builds the command pkg (an import path) once per test binary, into
// a temporary directory shared by every command it builds, and returns the
// binary's path; later calls return the first call's result. A TestMain
// that builds calls RemoveBuilt after m.Run. It may be called from any
// goroutine.
func Build(pkg string) (string, error) {
	buildMu.Lock()
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "vnic-test-bin-")
		if err != nil {
			buildMu.Unlock()
			return "", err
		}
		buildDir = dir
	}
	dir := buildDir
	r := builds[pkg]
	if r == nil {
		r = &buildResult{}
		builds[pkg] = r
	}
	buildMu.Unlock()
	r.once.Do(func() {
		r.path = filepath.Join(dir, path.Base(pkg))
		if out, err := exec.Command("go", "build", "-o", r.path, pkg).CombinedOutput(); err != nil {
			r.err = fmt.Errorf("build %s: %v: %s", pkg, err, out)
		}
	})
	return r.path, r.err
}

// MustBuild is Build that fails the test when the build fails.
func MustBuild(tb testing.TB, pkg string) string {
	tb.Helper()
	p, err := Build(pkg)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// RemoveBuilt removes what Build built (TestMain, after m.Run).
func RemoveBuilt() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	buildDir, builds = "", map[string]*buildResult{}
}
