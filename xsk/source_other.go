//go:build !linux

package xsk

import (
	"fmt"
	"time"
)

type pollState struct{}

func (s *Source) initPoll() {}

// Poll returns an error wrapping ErrNotSupported.
func (s *Source) Poll(timeout time.Duration) (bool, error) {
	return false, fmt.Errorf("xsk: poll: %w", ErrNotSupported)
}
