//go:build !linux

package main

import "errors"

// placeProcess needs Linux's CPU masks.
func placeProcess(cpu int) (restore func(), err error) {
	return nil, errors.New("section4: placing the process on a CPU needs Linux; run with -app-cpu -1")
}
