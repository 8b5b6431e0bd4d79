package casestudy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"time"
)

// The kernel-TCP transports of both case studies frame each message of at
// most 0xffff bytes by its length, 2 bytes big-endian.

// WriteFrame buffers msg in w behind its length. A failed write sticks in
// w: its error comes back here and from every later write or flush.
func WriteFrame(w *bufio.Writer, msg []byte) error {
	w.WriteByte(byte(len(msg) >> 8)) // bytes, not a slice: no allocation
	w.WriteByte(byte(len(msg)))
	_, err := w.Write(msg)
	return err
}

// ReadFrames reads the frames that arrive on conn, through a buffer of
// bufSize bytes, and calls fn with each message (valid during the call)
// until fn returns false. A message that fits the buffer is handed to fn
// where it lies in the buffer, not copied. The end of ctx interrupts the
// wait (a read deadline). It returns nil when fn returned false or ctx
// ended between two frames, else the error that ended the reading (a
// frame cut short by the end of ctx included).
func ReadFrames(ctx context.Context, conn net.Conn, bufSize int, fn func(msg []byte) bool) error {
	unblock := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	defer unblock()
	br := bufio.NewReaderSize(conn, bufSize)
	var buf []byte // for a message larger than br's buffer
	var l [2]byte  // out of the loop: it escapes (io.ReadFull)
	for {
		if _, err := io.ReadFull(br, l[:]); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		n := int(binary.BigEndian.Uint16(l[:]))
		m, err := br.Peek(n)
		inPlace := err == nil
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if buf == nil {
				buf = make([]byte, 0xffff)
			}
			m = buf[:n]
			_, err = io.ReadFull(br, m)
		case err == io.EOF:
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		more := fn(m)
		if inPlace {
			br.Discard(n)
		}
		if !more {
			return nil
		}
	}
}
