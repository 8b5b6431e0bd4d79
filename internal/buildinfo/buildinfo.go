package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Override, set with -ldflags -X, replaces the version read from the
// build information.
var Override string

// Version returns the version of the running binary: Override, else the
// module's version (go install module@version), else the VCS revision
// the toolchain stamped, else "devel".
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

// develNote is what --version adds to "devel": how to get a version.
const develNote = "devel (built without version information: build with make build, or go build -buildvcs=true in a git checkout)"

// Long is Version with the Go version and platform, for --version. A
// build with no version at all (go install with -buildvcs=false, outside
// a module proxy) says how to build one that has it.
func Long(cmd string) string {
	return long(cmd, Version())
}

func long(cmd, v string) string {
	if v == "devel" {
		v = develNote
	}
	return fmt.Sprintf("%s %s (%s, %s/%s)", cmd, v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
