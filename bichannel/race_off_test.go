//go:build !race

package bichannel

const raceEnabled = false
