//go:build !linux

package main

import "errors"

func testbedPlaces(string, int) ([]Place, error) {
	return nil, errors.New("kv: -testbed needs Linux network namespaces")
}
