package modgraph

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// toolsOnly are the module path prefixes that only the tools module may
// require: an application importing the library must not get them. The
// last two are the developer tools (staticcheck, benchstat): a tool
// directive in go.mod puts its module into every consumer's graph too.
var toolsOnly = []string{
	"k8s.io/",
	"sigs.k8s.io/",
	"github.com/google/go-containerregistry",
	"gonum.org/",
	"honnef.co/go/tools",
	"golang.org/x/perf",
}

// TestConsumerModuleGraph builds a scratch module that imports client and
// bichannel (with a replace to this checkout) and fails if its module graph
// holds a module of the tools.
func TestConsumerModuleGraph(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the scratch module: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(mod), "module github.com/vnic/vnic\n") {
		t.Fatalf("%s is not the root of github.com/vnic/vnic", root)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goLine := regexp.MustCompile(`(?m)^go [0-9.]+$`).FindString(string(mod)) // the library's own
	write("go.mod", "module example.com/consumer\n\n"+goLine+"\n\n"+
		"require github.com/vnic/vnic v0.0.0\n\n"+
		"replace github.com/vnic/vnic => "+root+"\n")
	write("main.go", "package main\n\nimport (\n"+
		"\t_ \"github.com/vnic/vnic/bichannel\"\n"+
		"\t_ \"github.com/vnic/vnic/client\"\n)\n\nfunc main() {}\n")
	// The library's go.sum holds every checksum the consumer needs, so
	// the build works from the module cache without the checksum database.
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))

	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -modcacherw")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goCmd, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("build", "-o", os.DevNull, ".")
	graph := run("list", "-m", "all")
	var bad []string
	for line := range strings.Lines(graph) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		for _, p := range toolsOnly {
			if strings.HasPrefix(fields[0], p) {
				bad = append(bad, fields[0])
			}
		}
	}
	if len(bad) > 0 {
		t.Errorf("a module importing client and bichannel gets the tools' dependencies in its module graph (move their users to tools/):\n\t%s", strings.Join(bad, "\n\t"))
	}
	if !strings.Contains(graph, "github.com/vnic/vnic v0.0.0 => "+root) {
		t.Errorf("go list -m all does not show the replaced library:\n%s", graph)
	}
}
