package ring

// prefetch hints w[0:nw] for writing and r[0:nr] for reading.
//
//go:noescape
func prefetch(w *uintptr, nw int, r *uintptr, nr int)
