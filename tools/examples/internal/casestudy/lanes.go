package casestudy

import (
	"bufio"
	"context"
	"net"
	"sync"
	"time"

	"github.com/vnic/vnic/bichannel"
)

// Writer is one outgoing connection of a Mesh behind a buffered writer.
// Mu guards W and Dead.
type Writer struct {
	Mu   sync.Mutex
	Conn net.Conn
	W    *bufio.Writer
	// Dead is for a user that stops writing to a connection once a write
	// failed (the KV's replication); Writers leaves it false.
	Dead bool
}

// Writers wraps each outgoing connection of m in a Writer with a buffer
// of bufSize bytes: [peer][lane], nil where m has no connection.
func (m *Mesh) Writers(bufSize int) [][]*Writer {
	ws := make([][]*Writer, len(m.Out))
	for p := range m.Out {
		ws[p] = make([]*Writer, len(m.Out[p]))
		for l, c := range m.Out[p] {
			if c != nil {
				ws[p][l] = &Writer{Conn: c, W: bufio.NewWriterSize(c, bufSize)}
			}
		}
	}
	return ws
}

// ReadLane reads the incoming connections of lane l of m, a goroutine
// each: it clears the read deadline an earlier ReadLane's end of ctx may
// have left, then runs ReadFrames (through a buffer of bufSize bytes),
// calling fn with each message and the node that sent it while holding
// mu, so that the calls of all the lane's connections come one at a time.
// When a connection's ReadFrames returns, done (if not nil) gets the node
// and the result. ReadLane returns once every connection's reading has
// ended; stopping the others when one ends is the caller's (fn returning
// false ends only its own connection's).
func (m *Mesh) ReadLane(ctx context.Context, l, bufSize int, mu *sync.Mutex, fn func(peer int, msg []byte) bool, done func(peer int, err error)) {
	var wg sync.WaitGroup
	for p := range m.In {
		conn := m.In[p][l]
		if conn == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn.SetReadDeadline(time.Time{})
			err := ReadFrames(ctx, conn, bufSize, func(msg []byte) bool {
				mu.Lock()
				defer mu.Unlock()
				return fn(p, msg)
			})
			if done != nil {
				done(p, err)
			}
		}()
	}
	wg.Wait()
}

// RecvLane calls e.RecvWait for lane l over and over, and fn with each
// message received (valid during the call), until fn returns false (then
// it returns nil) or RecvWait fails, which it returns once fn has had the
// messages received with it. Nothing is ignored: an error RecvWait returns
// once (a dead peer without Config.TolerateDeadPeers) it returns at once
// every time after, so going on would spin. An endpoint that must outlive
// its peers sets TolerateDeadPeers, as the KV store does.
func RecvLane(ctx context.Context, e *bichannel.Endpoint, l int, fn func(m *bichannel.Message) bool) error {
	msgs := make([]bichannel.Message, 0, 64)
	for {
		var err error
		msgs, err = e.RecvWait(ctx, l, msgs[:0])
		for i := range msgs {
			if !fn(&msgs[i]) {
				return nil
			}
		}
		if err != nil {
			return err
		}
	}
}
