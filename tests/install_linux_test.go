//go:build linux

package tests

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// repoRoot is the repository's top directory (this package is tests/).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// gitVersion is what make build stamps into --version.
func gitVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repoRoot(t), "-c", "safe.directory=*", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Skipf("not a git checkout (git describe: %v): make stamps no version", err)
	}
	return strings.TrimSpace(string(out))
}

// TestMakeInstallUninstall: make install puts a unit whose header says how
// it was installed (not to copy it into /etc/systemd/system), binaries that
// know their version, and make uninstall removes everything it installed,
// the documentation directory included.
func TestMakeInstallUninstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make here")
	}
	want := gitVersion(t)
	dest := t.TempDir()
	if out, err := exec.Command("make", "-C", repoRoot(t), "-s", "install", "DESTDIR="+dest).CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	unit, err := os.ReadFile(filepath.Join(dest, "usr/local/lib/systemd/system/vnicd.service"))
	if err != nil {
		t.Fatal(err)
	}
	header := string(unit[:strings.Index(string(unit), "[Unit]")])
	if strings.Contains(header, "/etc/systemd/system") || !strings.Contains(header, "Installed by make install as /usr/local/lib/systemd/system/vnicd.service") {
		t.Errorf("the installed unit's header:\n%s", header)
	}
	for _, f := range []string{"usr/local/share/doc/vnic/operations.md", "usr/local/share/doc/vnic/design.md"} {
		if _, err := os.Stat(filepath.Join(dest, f)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	out, err := exec.Command(filepath.Join(dest, "usr/local/bin/vnicd"), "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "vnicd "+want+" ") {
		t.Errorf("installed vnicd --version: %v %q, want vnicd %s", err, out, want)
	}
	if out, err := exec.Command("make", "-C", repoRoot(t), "-s", "uninstall", "DESTDIR="+dest).CombinedOutput(); err != nil {
		t.Fatalf("make uninstall: %v\n%s", err, out)
	}
	filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (!d.IsDir() || strings.HasSuffix(p, "/doc/vnic")) {
			t.Errorf("make uninstall left %s", strings.TrimPrefix(p, dest))
		}
		return nil
	})
}

// TestDemoBuildsVersionedBinaries: the binaries make demo runs (and
// leaves in bin/) print the checkout's version, even where the Go
// toolchain stamps no VCS information (GOFLAGS=-buildvcs=false, as in a
// build from a tarball or a clone root's git refuses to read).
func TestDemoBuildsVersionedBinaries(t *testing.T) {
	want := gitVersion(t)
	cmd := exec.Command("scripts/demo.sh", "--build-only")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("demo.sh --build-only: %v\n%s", err, out)
	}
	for _, b := range []string{"vnicd", "vnicctl"} {
		out, err := exec.Command(filepath.Join(repoRoot(t), "bin", b), "--version").Output()
		if err != nil || !strings.HasPrefix(string(out), b+" "+want+" ") {
			t.Errorf("bin/%s --version after the demo's build: %v %q, want %s %s", b, err, out, b, want)
		}
	}
}

// TestMakeDemoBuildsOnlyWhatItRuns: make demo does not build the tools
// module (plots, Kubernetes checks, the image builder) nor every package;
// it runs scripts/demo.sh, which builds vnicd, vnicctl and rxcount only.
func TestMakeDemoBuildsOnlyWhatItRuns(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make here")
	}
	out, err := exec.Command("make", "-C", repoRoot(t), "--no-print-directory", "-n", "demo").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n demo: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 || !strings.HasSuffix(lines[0], "scripts/demo.sh") {
		t.Errorf("make demo runs more than scripts/demo.sh:\n%s", out)
	}
	script, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts/demo.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var builds []string
	for _, l := range strings.Split(string(script), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "go ") {
			builds = append(builds, l)
		}
	}
	if len(builds) != 1 || !strings.HasSuffix(builds[0], " -o bin/ ./cmd/vnicd ./cmd/vnicctl ./examples/rxcount") {
		t.Errorf("scripts/demo.sh should build vnicd, vnicctl and rxcount only, in one go build; it runs:\n%s", strings.Join(builds, "\n"))
	}
}

// TestREADMEInstallFromCheckout runs the README's go install line, as
// written, from the top of the checkout, into a GOBIN of its own.
func TestREADMEInstallFromCheckout(t *testing.T) {
	line := readmeLine(t, "go install ")
	if strings.Contains(line, "@") {
		t.Fatalf("the README installs %q, from a module path that is not published", line)
	}
	gobin := t.TempDir()
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	for _, b := range []string{"vnicd", "vnicctl"} {
		if out, err := exec.Command(filepath.Join(gobin, b), "--version").Output(); err != nil || !strings.HasPrefix(string(out), b+" ") {
			t.Errorf("%s --version after %s: %v %q", b, line, err, out)
		}
	}
}

// TestDemoInterrupted: Ctrl-C during make demo (SIGINT to its process
// group, as a terminal sends it) stops the demo with status 130 and one
// line that says so, without the report that follows a finished run, and
// leaves no process of the demo behind (vnicd and rxcount catch SIGINT
// too; the script kills them in any case). It runs the synthetic-traffic
// mode (SYNTH=1), which needs neither root nor a testbed.
func TestDemoInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo")
	}
	if out, err := exec.Command(filepath.Join(repoRoot(t), "scripts/demo.sh"), "--build-only").CombinedOutput(); err != nil {
		t.Fatalf("demo.sh --build-only: %v\n%s", err, out)
	}
	cmd := exec.Command("scripts/demo.sh")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "SYNTH=1", "EMULATOR_CPU=-1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	defer syscall.Kill(-pgid, syscall.SIGKILL)
	// Interrupt while vnicctl watch shows the traffic: it catches SIGINT
	// and exits normally, after which bash would skip an INT trap.
	var out strings.Builder
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "pkts/s") {
			break
		}
	}
	if err := syscall.Kill(-pgid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("demo exit: %v, want status 130\n%s", err, out.String())
	}
	text := out.String()
	last := strings.TrimSpace(text[strings.LastIndex(strings.TrimRight(text, "\n"), "\n")+1:])
	if !strings.Contains(last, "demo interrupted") || !strings.Contains(last, "removed") {
		t.Errorf("last line %q, want one saying the demo was interrupted and cleaned up\n%s", last, text)
	}
	for _, s := range []string{"not running", "not delivered", "done:"} {
		if strings.Contains(text, s) {
			t.Errorf("output after the interrupt contains %q:\n%s", s, text)
		}
	}
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("a process of the demo is still running (kill -0 on its group: %v)", err)
	}
}
