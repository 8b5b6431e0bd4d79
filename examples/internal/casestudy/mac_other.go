//go:build !linux

package casestudy

import "errors"

func hostMAC(string, int) ([6]byte, error) {
	return [6]byte{}, errors.New("testbeds need Linux network namespaces")
}
