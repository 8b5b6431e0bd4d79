//go:build !linux

package shm

// Hole needs a memfd, which only Linux has.
func (r *Region) Hole() (off int64, found bool, err error) {
	return 0, false, ErrNotSupported
}
