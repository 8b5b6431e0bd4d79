package cliutil

import (
	"bytes"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// TestFlagError: a value a flag's type cannot parse gets one sentence that
// names the flag, the type and, for numbers, what the flag counts.
func TestFlagError(t *testing.T) {
	app := &cli.App{Name: "x", Writer: &bytes.Buffer{}, ErrWriter: &bytes.Buffer{}, ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{{Name: "run", Action: func(*cli.Context) error { return nil },
			OnUsageError: func(c *cli.Context, err error, _ bool) error { return FlagError(c, err) },
			Flags: []cli.Flag{
				&cli.Float64Flag{Name: "rate", Usage: "packets per second"},
				&cli.DurationFlag{Name: "spin", Value: time.Millisecond},
				&cli.IntFlag{Name: "count", Usage: "stop after `N` frames"},
				&cli.BoolFlag{Name: "check"},
			}}}}
	for _, c := range []struct{ arg, want string }{
		{"--rate=fast", `--rate "fast" is not a number; --rate takes a number: packets per second`},
		{"--spin=200", `--spin "200" is not a duration; give a number with its unit (ns, us, ms, s, m or h), e.g. 200us, 5ms or 2s`},
		{"--count=many", `--count "many" is not a whole number; --count takes a whole number: stop after N frames`},
		{"--check=maybe", `--check "maybe" is not true or false; give --check alone for true`},
	} {
		err := app.Run([]string{"x", "run", c.arg})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.arg, err, c.want)
		}
	}
	if err := FlagError(nil, nil); err != nil {
		t.Errorf("nil: %v", err)
	}
}
