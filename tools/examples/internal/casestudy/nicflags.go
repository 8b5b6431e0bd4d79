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
	fs.StringVar(&f.nicPids, "nic-pids", "", "pids of the NIC processes (each host's vnicd), comma-separated, whose CPU time is reported as NIC CPU-s")
	fs.StringVar(&f.Vnicd, "vnicd", "", "with -fast fabric, the vnicd binary (default: vnicd on PATH, else built from this module)")
	fs.StringVar(&f.FabricIdle, "fabric-idle", "adaptive", "with -fast fabric, vnicd's --idle: adaptive or busy")
	fs.DurationVar(&f.VnicSpin, "vnic-spin", 0, "with -fast vnic or fabric, how long a worker polls its queue before it sleeps (0: the bi-channel's default, 50µs; negative: sleep at once, which leaves a CPU that the hosts share to the ones with work)")
	fs.StringVar(&f.fabricArgs, "fabric-args", "", "with -fast fabric, more vnicd run flags, space-separated (e.g. --fabric-delay 20us)")
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
