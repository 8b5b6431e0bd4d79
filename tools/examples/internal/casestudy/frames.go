package casestudy

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"time"
)

// The kernel-TCP transports of both case studies frame each message of at
// most 0xffff bytes by its length, 2 bytes big-endian.

// WriteFrame buffers msg in w behind its length. A failed write sticks in
// w: its error comes back here and from every later write or flush.
func WriteFrame(w *bufio.Writer, msg []byte) error {
	var l [2]byte
	binary.BigEndian.PutUint16(l[:], uint16(len(msg)))
	w.Write(l[:])
	_, err := w.Write(msg)
	return err
}

// ReadFrames reads the frames that arrive on conn, through a buffer of
// bufSize bytes, and calls fn with each message (valid during the call)
// until fn returns false. The end of ctx interrupts the wait (a read
// deadline). It returns nil when fn returned false or ctx ended between
// two frames, else the error that ended the reading (a frame cut short
// by the end of ctx included).
func ReadFrames(ctx context.Context, conn net.Conn, bufSize int, fn func(msg []byte) bool) error {
	unblock := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	defer unblock()
	br := bufio.NewReaderSize(conn, bufSize)
	buf := make([]byte, 0xffff)
	for {
		var l [2]byte
		if _, err := io.ReadFull(br, l[:]); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		m := buf[:binary.BigEndian.Uint16(l[:])]
		if _, err := io.ReadFull(br, m); err != nil {
			return err
		}
		if !fn(m) {
			return nil
		}
	}
}
