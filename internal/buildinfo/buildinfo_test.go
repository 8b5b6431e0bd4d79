package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, c := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		// go install with -buildvcs=false: the module's version, with or
		// without VCS settings.
		{debug.BuildInfo{Main: debug.Module{Version: "v0.4.0-rc.1"}, Settings: []debug.BuildSetting{{Key: "-buildvcs", Value: "false"}}}, "v0.4.0-rc.1"},
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}, "v1.2.3"},
		{debug.BuildInfo{Main: debug.Module{Version: ""}}, "devel"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "049a548d5d3e8f1c0a7b"}, {Key: "vcs.time", Value: "2026-11-30T19:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"devel-049a548d5d3e+dirty (2026-11-30T19:00:00Z)"},
		{debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}, "devel-abc"},
	} {
		if got := fromBuildInfo(&c.bi); got != c.want {
			t.Errorf("%+v: %q, want %q", c.bi, got, c.want)
		}
	}
	if v := Version(); v == "" {
		t.Error("empty version")
	}
	Override = "v9"
	defer func() { Override = "" }()
	if v := Long("vnicd"); !strings.HasPrefix(v, "vnicd v9 (go") {
		t.Errorf("Long: %q", v)
	}
}

// TestLongDevel: a build with no version says how to get one, in one
// line; a build with one prints it alone.
func TestLongDevel(t *testing.T) {
	v := long("vnicd", "devel")
	want := "vnicd devel (built without version information: build with make build, or go build -buildvcs=true in a git checkout) (go"
	if !strings.HasPrefix(v, want) || strings.Contains(v, "\n") {
		t.Errorf("long(devel): %q, want it to start with %q", v, want)
	}
	if v := long("vnicd", "v1.2.3"); !strings.HasPrefix(v, "vnicd v1.2.3 (go") || strings.Contains(v, "built without") {
		t.Errorf("long(v1.2.3): %q", v)
	}
}
