//go:build race

package nic_test

const raceEnabled = true
