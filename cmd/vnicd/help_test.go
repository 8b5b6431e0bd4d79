package main

import (
	"bytes"
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
