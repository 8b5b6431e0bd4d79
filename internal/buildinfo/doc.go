// Package buildinfo gives the version string of vnic's commands (vnicd
// --version, vnicctl --version, vnicctl status) from the build information
// the Go toolchain embeds: the module version for `go install ...@v1.2.3`,
// else the VCS revision and time of a build in a clone (with "+dirty" for
// uncommitted changes), else "devel". A linker flag
// (-ldflags "-X github.com/vnic/vnic/internal/buildinfo.Override=...")
// wins over both.
package buildinfo
