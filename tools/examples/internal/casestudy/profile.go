package casestudy

import (
	"os"
	"runtime/pprof"
)

// StartCPUProfile writes a CPU profile to path until the returned stop is
// called (the -cpuprofile flag of both case studies). An empty path
// profiles nothing and stop does nothing.
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
