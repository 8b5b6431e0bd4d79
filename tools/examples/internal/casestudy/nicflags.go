package casestudy

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// NICFlags are the flags of the NIC side that both case studies take:
// -nic-pids, -vnicd, -fabric-idle, -vnic-spin and -fabric-args. Register
// them on a flag set, and Check them after it has parsed.
type NICFlags struct {
	NICPids    []int         // -nic-pids
	Vnicd      string        // -vnicd
	FabricIdle string        // -fabric-idle: adaptive or busy
	VnicSpin   time.Duration // -vnic-spin
	FabricArgs []string      // -fabric-args, split at spaces

	nicPids, fabricArgs string
}

// Register defines the flags on fs.
func (f *NICFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.nicPids, "nic-pids", "", "pids of the NIC processes, reported as NIC CPU-s (comma-separated)")
	fs.StringVar(&f.Vnicd, "vnicd", "", "with -fast fabric, the vnicd binary (default: PATH, else built)")
	fs.StringVar(&f.FabricIdle, "fabric-idle", "adaptive", "with -fast fabric, vnicd's --idle: adaptive or busy")
	fs.DurationVar(&f.VnicSpin, "vnic-spin", 0, "with -fast vnic or fabric, a worker's poll before it sleeps")
	fs.StringVar(&f.fabricArgs, "fabric-args", "", "with -fast fabric, more vnicd run flags, space-separated")
}

// Check validates the parsed flags and fills NICPids and FabricArgs.
func (f *NICFlags) Check() error {
	if f.FabricIdle != "adaptive" && f.FabricIdle != "busy" {
		return fmt.Errorf("-fabric-idle %q: give adaptive or busy", f.FabricIdle)
	}
	f.FabricArgs = strings.Fields(f.fabricArgs)
	if f.nicPids != "" {
		var err error
		if f.NICPids, err = Ints("nic-pids", f.nicPids); err != nil {
			return err
		}
	}
	return nil
}

// VnicdMode names, for a report's header, the vnicd the command runs
// given -fast: its idle mode (busy-polling or adaptive), or none.
func (f *NICFlags) VnicdMode(fast string) string {
	switch {
	case fast != "fabric":
		return "none started (-fast " + fast + ")"
	case f.FabricIdle == "busy":
		return "busy-polling"
	}
	return f.FabricIdle
}
