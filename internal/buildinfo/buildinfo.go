package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Override, set with -ldflags -X, replaces the version read from the
// build information.
var Override string

// Version returns the version of the running binary.
func Version() string {
	if Override != "" {
		return Override
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "devel-" + rev + dirty
	if at != "" {
		v += " (" + at + ")"
	}
	return v
}

// Long is Version with the Go version and platform, for --version.
func Long(cmd string) string {
	return fmt.Sprintf("%s %s (%s, %s/%s)", cmd, Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
