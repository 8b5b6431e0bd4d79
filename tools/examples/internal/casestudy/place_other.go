//go:build !linux

package casestudy

import "errors"

// TestbedPlace puts a node in a testbed's host namespace: Linux only.
func TestbedPlace(string, int) (Place, error) {
	return Place{}, errors.New("testbeds need Linux network namespaces")
}
