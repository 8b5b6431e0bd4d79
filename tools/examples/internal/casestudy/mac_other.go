//go:build !linux

package casestudy

import "errors"

func hostMAC(string, int) ([6]byte, error) {
	return [6]byte{}, errors.New("testbeds need Linux network namespaces")
}

// HostMTU reads the MTU of a testbed host's interface: Linux only.
func HostMTU(string, int) (int, error) {
	return 0, errors.New("testbeds need Linux network namespaces")
}
