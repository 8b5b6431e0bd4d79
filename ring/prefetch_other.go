//go:build !amd64

package ring

func prefetch(w *uintptr, nw int, r *uintptr, nr int) {}
