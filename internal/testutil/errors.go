package testutil

import "errors"

// ErrNotSupported is wrapped by the errors of helpers this platform lacks.
var ErrNotSupported = errors.New("testutil: not supported on this platform")
