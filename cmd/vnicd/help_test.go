package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/urfave/cli/v2"
)

// TestRunHelpFits80Columns: vnicd run --help and vnicd demo --help wrap
// every line at 80 columns and still list every flag with its whole usage.
func TestRunHelpFits80Columns(t *testing.T) {
	for _, cmd := range []*cli.Command{runCommand(), demoCommand()} {
		t.Run(cmd.Name, func(t *testing.T) { helpFits(t, cmd) })
	}
}

func helpFits(t *testing.T, cmd *cli.Command) {
	var out, errb bytes.Buffer
	if err := newApp(&out, &errb).Run([]string{"vnicd", cmd.Name, "--help"}); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	for i, l := range strings.Split(help, "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("line %d is %d columns:\n%s", i+1, n, l)
		}
	}
	flat := strings.Join(strings.Fields(help), " ")
	for _, f := range cmd.Flags {
		if h, ok := f.(interface{ IsVisible() bool }); ok && !h.IsVisible() {
			continue // refused with the replacement's name
		}
		name := f.Names()[0]
		if !strings.Contains(help, "--"+name+" ") && !strings.Contains(help, "--"+name+"\n") {
			t.Errorf("flag --%s missing from the help", name)
		}
		if u, ok := f.(interface{ GetUsage() string }); ok && !strings.Contains(flat, strings.Join(strings.Fields(u.GetUsage()), " ")) {
			t.Errorf("--%s's usage is not whole in the help: %q", name, u.GetUsage())
		}
	}
}

// TestEveryHelpFits80Columns: vnicd --help and every command's --help fit
// 80 columns, and the command list keeps each command's usage in its own
// column (a wrapped usage continues under the usage, not under the name).
func TestEveryHelpFits80Columns(t *testing.T) {
	help := func(args ...string) string {
		var out, errb bytes.Buffer
		if err := newApp(&out, &errb).Run(append([]string{"vnicd"}, args...)); err != nil {
			t.Fatalf("vnicd %s: %v", strings.Join(args, " "), err)
		}
		for i, l := range strings.Split(out.String(), "\n") {
			if n := utf8.RuneCountInString(l); n > 80 {
				t.Errorf("vnicd %s: line %d is %d columns:\n%s", strings.Join(args, " "), i+1, n, l)
			}
		}
		return out.String()
	}
	top := help("--help")
	for _, c := range newApp(io.Discard, io.Discard).Commands {
		help(c.Name, "--help")
	}
	_, list, _ := strings.Cut(top, "COMMANDS:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	col := -1
	for _, l := range strings.Split(list, "\n") {
		name := strings.TrimLeft(l, " ")
		i := len(l) - len(name)
		if j := strings.Index(name, "  "); j > 0 {
			// A command: its usage starts after the name's padding.
			u := i + j + len(name[j:]) - len(strings.TrimLeft(name[j:], " "))
			if col >= 0 && u != col {
				t.Errorf("usage at column %d, not %d:\n%s", u, col, list)
			}
			col = u
		} else if i != col {
			t.Errorf("continued usage at column %d, not %d:\n%s", i, col, list)
		}
	}
}
