package main

import (
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/nic/fabric"
)

// The fabric's flags reach its configuration: the source check is on
// unless --fabric-no-source-check.
func TestFabricFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--fabric-no-source-check"}, true}} {
		var fc fabric.Config
		app := &cli.App{Flags: append(fabricFlags(), &cli.IntFlag{Name: "buf-size", Value: 2048}), Action: func(ctx *cli.Context) error {
			var err error
			fc, _, err = fabricConfig(ctx, "fabric")
			return err
		}}
		if err := app.Run(append([]string{"vnicd"}, c.args...)); err != nil {
			t.Fatal(err)
		}
		if fc.NoSourceCheck != c.want {
			t.Fatalf("%v: NoSourceCheck %v", c.args, fc.NoSourceCheck)
		}
	}
}
