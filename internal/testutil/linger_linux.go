package testutil

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// LingeringSocket returns a connected TCP socket on loopback with SO_LINGER
// set (a minute) and data queued behind a peer that never reads, for tests
// of code that must never drop a descriptor it was handed: the final close
// of this one blocks in the kernel until the data leaves or the linger
// time passes. release closes it without blocking (linger off first) and
// closes the peer.
func LingeringSocket() (fd int, release func(), err error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return -1, nil, err
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		c.(*net.TCPConn).SetReadBuffer(4096)
		accepted <- c
	}()
	fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	var peer net.Conn
	select {
	case peer = <-accepted:
	case <-time.After(5 * time.Second):
	}
	unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 60})
	unix.SetNonblock(fd, true)
	junk := make([]byte, 1<<16)
	for i := 0; i < 64; i++ {
		if _, err := unix.Write(fd, junk); err != nil {
			break
		}
	}
	unix.SetNonblock(fd, false)
	return fd, func() {
		unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{})
		unix.Close(fd)
		if peer != nil {
			peer.Close()
		}
	}, nil
}
