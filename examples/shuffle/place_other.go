//go:build !linux

package main

import "errors"

func testbedPlaces(string, int) ([]Place, error) {
	return nil, errors.New("shuffle: -testbed needs Linux network namespaces")
}
