//go:build !linux

package client

import (
	"errors"
	"fmt"
)

// errNeedsLinux is what Attach returns off Linux: vnicd and its shared
// regions exist only there. It wraps errors.ErrUnsupported.
var errNeedsLinux = fmt.Errorf("vnic's client needs Linux: vnicd's regions are sealed memfds passed over SCM_RIGHTS, and Wait sleeps on a futex in them: %w", errors.ErrUnsupported)

// platformSupported returns errNeedsLinux: Attach cannot work here.
func platformSupported() error { return errNeedsLinux }

// socketGroup is unknown off Linux (Attach refuses before it is needed).
func socketGroup(string) string { return "" }
