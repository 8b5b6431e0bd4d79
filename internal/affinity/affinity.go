package affinity

import "errors"

// ErrNotSupported is returned where the platform cannot pin threads.
var ErrNotSupported = errors.New("affinity: not supported on this platform")

// Thread is one thread of this process and the CPUs it may run on.
type Thread struct {
	TID     int
	Allowed string // Cpus_allowed_list as /proc prints it, e.g. "0-1"
}
