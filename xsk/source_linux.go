package xsk

import (
	"time"

	"golang.org/x/sys/unix"
)

type pollState struct {
	fds []unix.PollFd
}

func (s *Source) initPoll() {
	s.poll.fds = make([]unix.PollFd, len(s.socks))
	for i, sk := range s.socks {
		s.poll.fds[i] = unix.PollFd{Fd: int32(sk.fd), Events: unix.POLLIN}
	}
}

// Poll waits up to timeout (forever if negative) until some queue has
// frames, and reports whether one has. The sockets have no TX ring unless
// configured, so polling them never triggers transmission.
func (s *Source) Poll(timeout time.Duration) (bool, error) {
	if s.closed {
		return false, ErrClosed
	}
	for i := range s.poll.fds {
		s.poll.fds[i].Revents = 0
	}
	return pollFDs(s.poll.fds, timeout)
}
