package client

import "golang.org/x/sys/unix"

// Wake wakes a Wait that sleeps on this queue's eventfd, so that it checks
// its context again (a Wait still spinning sees the context at its next
// check anyway). It is for a receiver that must also react to events of
// its own, such as the bi-channel's messages retransmitted over TCP: it
// cancels the context it gave Wait, or makes its Err non-nil, then calls
// Wake. Safe from any goroutine while the tenant is open; one write(2).
func (q *Queue) Wake() {
	if q.wake == nil || (q.gone != nil && q.gone.Load()) {
		return
	}
	one := [8]byte{1}
	unix.Write(int(q.wake.Fd()), one[:])
}
