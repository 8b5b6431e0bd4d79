package hostile

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/internal/proto"
)

// params of a child attack.
type params struct {
	N       int                  `json:"n"`
	Bytes   int                  `json:"bytes,omitempty"`
	Repeat  int                  `json:"repeat,omitempty"`
	Attach  client.AttachOptions `json:"attach"`
	Hold    bool                 `json:"hold,omitempty"`
	Timeout time.Duration        `json:"timeout,omitempty"`
}

// childMain runs one attack as nobody: it prints "ready ..." once set up,
// waits for its stdin to close, cleans up and prints a report.
func childMain(kind string) int {
	// io_uring charges its rings to the user's locked memory, which every
	// process of nobody's shares (two suites on one machine, or the
	// kernel's asynchronous teardown of an earlier attacker's rings): the
	// limit goes before the privileges, so that the attack sets up.
	unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY})
	if err := unix.Setgroups(nil); err == nil {
		unix.Setgid(65534)
		unix.Setuid(65534)
	}
	if os.Getuid() != 65534 {
		fmt.Println("error: cannot become nobody")
		return 1
	}
	sock := os.Getenv("VNIC_HOSTILE_SOCKET")
	var p params
	json.Unmarshal([]byte(os.Getenv("VNIC_HOSTILE_PARAMS")), &p)
	var cleanup func() string
	var ready string
	switch kind {
	case "idle":
		ready, cleanup = idle(sock, p)
	case "big":
		ready, cleanup = big(sock, p)
	case "noread":
		ready, cleanup = noread(sock, p)
	case "attach":
		ready, cleanup = attachMany(sock, p)
	case "punch":
		ready, cleanup = punch(sock, p)
	case "stuck":
		ready, cleanup = stuck(sock, p)
	case "wake":
		ready, cleanup = wakeAbuse(sock, p)
	case "futex":
		ready, cleanup = futexAbuse(sock, p)
	default:
		fmt.Println("error: unknown attack", kind)
		return 1
	}
	fmt.Println("ready", ready)
	io.Copy(io.Discard, os.Stdin)
	fmt.Println(cleanup())
	return 0
}

func dial(sock string) (*net.UnixConn, error) {
	return net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"})
}

// refused reports whether vnicd closed c (after refusing it with an
// error message) within d.
func refused(c *net.UnixConn, d time.Duration) (bool, string) {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout()), ""
	}
	if n > proto.HeaderSize {
		return true, string(buf[proto.HeaderSize:n])
	}
	return true, ""
}

// idle opens N connections that never send anything and holds them.
func idle(sock string, p params) (string, func() string) {
	var conns []*net.UnixConn
	failed := 0
	var lastErr error
	for i := 0; i < p.N; i++ {
		c, err := dial(sock)
		if err != nil {
			failed++
			lastErr = err
			continue
		}
		conns = append(conns, c)
	}
	// Which of them did vnicd refuse?
	closed, msg := 0, ""
	for _, c := range conns {
		if ok, m := refused(c, 2*time.Millisecond); ok {
			closed++
			if m != "" {
				msg = m
			}
		}
	}
	return fmt.Sprintf("%d connected (%d dial errors, last %v), %d closed at once by vnicd: %s", len(conns), failed, lastErr, closed, msg),
		func() string {
			// Are the survivors closed by the first-message deadline?
			alive := 0
			for _, c := range conns {
				if ok, _ := refused(c, time.Millisecond); !ok {
					alive++
				}
				c.Close()
			}
			return fmt.Sprintf("%d connections still open at the end", alive)
		}
}

// big opens N connections, each sending one datagram of Bytes bytes
// (after raising its send buffer), and holds them.
func big(sock string, p params) (string, func() string) {
	var conns []*net.UnixConn
	sent, errs := 0, map[string]int{}
	msg := make([]byte, p.Bytes)
	binary.LittleEndian.PutUint32(msg, proto.Magic)
	binary.LittleEndian.PutUint16(msg[4:], proto.Version)
	binary.LittleEndian.PutUint16(msg[6:], uint16(proto.TStatus))
	binary.LittleEndian.PutUint32(msg[8:], uint32(len(msg)-proto.HeaderSize))
	for i := 0; i < p.N; i++ {
		c, err := dial(sock)
		if err != nil {
			errs[err.Error()]++
			continue
		}
		conns = append(conns, c)
		if raw, err := c.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, 4*len(msg)) })
		}
		c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Write(msg); err != nil {
			errs[err.Error()]++
			continue
		}
		sent++
	}
	return fmt.Sprintf("%d connections, %d datagrams of %d bytes sent, errors %v", len(conns), sent, p.Bytes, errs), func() string {
		closed := 0
		for _, c := range conns {
			if ok, _ := refused(c, time.Millisecond); ok {
				closed++
			}
			c.Close()
		}
		return fmt.Sprintf("%d of %d connections closed by vnicd", closed, len(conns))
	}
}

// noread opens N connections, each pipelining Repeat stats requests without
// reading a reply; then (at stop) it goes away.
func noread(sock string, p params) (string, func() string) {
	var conns []*net.UnixConn
	sent := 0
	msg := make([]byte, proto.HeaderSize)
	binary.LittleEndian.PutUint32(msg, proto.Magic)
	binary.LittleEndian.PutUint16(msg[4:], proto.Version)
	binary.LittleEndian.PutUint16(msg[6:], uint16(proto.TStats))
	for i := 0; i < p.N; i++ {
		c, err := dial(sock)
		if err != nil {
			continue
		}
		conns = append(conns, c)
		for j := 0; j < p.Repeat; j++ {
			c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
			if _, err := c.Write(msg); err != nil {
				break
			}
			sent++
		}
	}
	if p.Timeout > 0 {
		time.Sleep(p.Timeout)
	}
	closed := 0
	for _, c := range conns {
		if ok, _ := refusedDrain(c); ok {
			closed++
		}
	}
	return fmt.Sprintf("%d connections, %d requests queued, %d disconnected by vnicd", len(conns), sent, closed), func() string {
		for _, c := range conns {
			c.Close()
		}
		return "closed"
	}
}

// refusedDrain reads what is queued without waiting and reports whether
// the connection was closed by vnicd.
func refusedDrain(c *net.UnixConn) (bool, int) {
	buf := make([]byte, proto.MaxMessage)
	n := 0
	for {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		k, err := c.Read(buf)
		if err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout()), n
		}
		if k == 0 {
			return true, n
		}
		n++
	}
}

// attachMany attaches up to N tenants with the given options (names get a
// suffix), holding those vnicd grants; it reports the first refusal.
func attachMany(sock string, p params) (string, func() string) {
	var tens []*client.Tenant
	errs := map[string]int{}
	for i := 0; i < p.N; i++ {
		o := p.Attach
		if o.Name != "" {
			o.Name = fmt.Sprintf("%s%d", o.Name, i)
		}
		if o.Match.DstPortLo != 0 {
			o.Match.DstPortLo += uint16(i)
			o.Match.DstPortHi = o.Match.DstPortLo
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t, err := client.Attach(ctx, sock, o)
		cancel()
		if err != nil {
			s := err.Error()
			if k := strings.Index(s, "attach: "); k >= 0 {
				s = s[k+8:]
			}
			errs[s]++
			continue
		}
		tens = append(tens, t)
	}
	b, _ := json.Marshal(errs)
	return fmt.Sprintf("%d attached; refusals %s", len(tens), b), func() string {
		for _, t := range tens {
			t.Close()
		}
		return "detached"
	}
}

// punch attaches one tenant, receives on all its queues, and punches holes
// into its buffer section (fallocate PUNCH_HOLE on the memfd vnicd sent,
// which the seals allow) as fast as it can, until vnicd detaches it or
// p.Timeout passes. Its rings stay intact: only the engine's page faults
// on its frames give it away.
func punch(sock string, p params) (string, func() string) {
	ten, err := client.Attach(context.Background(), sock, p.Attach)
	if err != nil {
		return "attach: " + err.Error(), func() string { return "" }
	}
	ctx, stop := context.WithCancel(context.Background())
	var got atomic.Int64
	var wg sync.WaitGroup
	for q := 0; q < ten.Queues(); q++ {
		wg.Add(1)
		go func(q *client.Queue) {
			defer wg.Done()
			pk := make([]client.Packet, 0, 32)
			for q.Wait(ctx) == nil {
				pk, _ = q.Recv(pk[:0])
				got.Add(int64(len(pk)))
				q.Release(pk)
			}
		}(ten.Queue(q))
	}
	fd := ten.Region.FD()
	off, size := int64(ten.Region.Lay.Buf), int64(ten.Region.Lay.BufBytes)
	n, errs := 0, 0
	t0 := time.Now()
	end := t0.Add(p.Timeout)
	var last error
	for time.Now().Before(end) && ten.Err() == nil {
		if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, size); err != nil {
			errs++
			last = err
		}
		n++
		time.Sleep(100 * time.Microsecond)
	}
	took := time.Since(t0)
	stop()
	wg.Wait()
	return fmt.Sprintf("%d punches of %d bytes in %v (%d failed, last %v), %d frames received; tenant error now: %v", n, size, took.Round(time.Millisecond), errs, last, got.Load(), ten.Err()), func() string {
		ten.Close()
		return "detached"
	}
}

var _ = syscall.EAGAIN
