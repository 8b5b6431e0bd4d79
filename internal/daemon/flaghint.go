package daemon

import (
	"errors"
	"fmt"

	"github.com/vnic/vnic/nic"
)

// engineFlags names vnicd's flag, with the value to give, for each
// nic.Config field whose value a nic.ConfigError blames.
var engineFlags = map[string]string{
	"EmulatorCPU":          "--emulator-cpu -1",
	"EmulatorIdlePriority": "--emulator-priority normal",
}

// FlagHint rewrites an error that a nic.Config field caused so that it
// names the vnicd flag that sets the field; other errors pass unchanged.
func FlagHint(err error) error {
	var ce *nic.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	flag, ok := engineFlags[ce.Field]
	if !ok {
		return err
	}
	return &flagError{ce, flag}
}

// flagError is a nic.ConfigError told in vnicd's flags; errors.As still
// finds the ConfigError.
type flagError struct {
	ce   *nic.ConfigError
	flag string
}

func (e *flagError) Error() string {
	return fmt.Sprintf("nic: %s: %v; or use %s", e.ce.Op, e.ce.Err, e.flag)
}

func (e *flagError) Unwrap() error { return e.ce }
