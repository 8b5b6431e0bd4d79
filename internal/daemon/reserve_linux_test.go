package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/daemon"
	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/internal/testutil"
	"github.com/vnic/vnic/nic"
)

// The reserve's tests with real credentials: the test process is root,
// and what must run as another user (vnicd as nobody, a flood of
// vnicd's own uid, members of the admin group and others) runs in a child
// of this test binary that takes its credentials first thing. The child
// starts as root because the binary sits in the go tool's private
// directory, which other users may not read.

func init() {
	testChildren["reserve-daemon"] = reserveDaemonChild
	testChildren["reserve-flood"] = reserveFloodChild
	testChildren["reserve-client"] = reserveClientChild
}

// childParams configure a child (VNIC_DAEMON_TEST_PARAMS, JSON).
type childParams struct {
	Socket string
	// The credentials the child takes: uid, gid, supplementary groups.
	UID, GID uint32
	Groups   []uint32
	// reserve-daemon: the limits of the vnicd it runs.
	MaxConns, MaxConnsPerUID, ReservedConns int
	FirstMessageTimeout                     time.Duration
	// reserve-flood: the connections to hold (0: as many as vnicd admits,
	// then one more tried every Interval), each sending a status request
	// every Interval.
	Conns    int
	Interval time.Duration
}

// floodReport is what reserve-flood prints: once its connections are
// open, then once for each "report" line on its stdin.
type floodReport struct {
	Held    int      `json:"held"`
	Refused string   `json:"refused"` // why the connection after the held ones was refused
	Closed  []int    `json:"closed"`  // held connections vnicd closed, by index
	Answers []uint64 `json:"answers"` // status replies on each held connection
	Extra   int      `json:"extra"`   // connections admitted after the refusal
}

// becomeUser gives the child p's credentials. The syscall package's calls
// apply them to every thread of the process; x/sys/unix's Setgroups
// changes only the calling thread's.
func becomeUser(p childParams) error {
	groups := make([]int, len(p.Groups))
	for i, g := range p.Groups {
		groups[i] = int(g)
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(int(p.GID)); err != nil {
		return fmt.Errorf("setgid: %w", err)
	}
	if err := syscall.Setuid(int(p.UID)); err != nil {
		return fmt.Errorf("setuid: %w", err)
	}
	if os.Getuid() != int(p.UID) || os.Getgid() != int(p.GID) {
		return fmt.Errorf("still uid %d gid %d", os.Getuid(), os.Getgid())
	}
	return nil
}

// childSetup reads a child's parameters and takes its credentials.
func childSetup() (childParams, bool) {
	var p childParams
	if err := json.Unmarshal([]byte(os.Getenv("VNIC_DAEMON_TEST_PARAMS")), &p); err != nil {
		fmt.Println("error: parameters:", err)
		return p, false
	}
	if err := becomeUser(p); err != nil {
		fmt.Println("error:", err)
		return p, false
	}
	return p, true
}

// reserveDaemonChild runs vnicd as p's user until its stdin closes.
func reserveDaemonChild() int {
	p, ok := childSetup()
	if !ok {
		return 1
	}
	unix.Umask(0o022) // the socket is 0755 until vnicd listens and chmods it (see waitListening)
	cfg := daemon.Config{Socket: p.Socket, SocketGroup: -1, Source: testutil.NewPaced(0, time.Hour, 1), SourceName: "test",
		Engine: nic.Config{EmulatorCPU: -1}, Log: zerolog.New(io.Discard), AxSize: 512, BxSize: 1024, TxSize: 64, NoHugePages: true}
	cfg.Limits.MaxConns, cfg.Limits.MaxConnsPerUID, cfg.Limits.ReservedConns = p.MaxConns, p.MaxConnsPerUID, p.ReservedConns
	cfg.Limits.FirstMessageTimeout = p.FirstMessageTimeout
	d, err := daemon.New(cfg)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	if err := d.Run(ctx); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}

// status asks vnicd for its status on c. A refusal at accept (an error
// vnicd sends unasked before it closes) is read even when the request
// could no longer be sent, or arrived after vnicd's close: the reset that
// an unread request causes comes first, the queued error after it.
func status(c *proto.Conn) error {
	c.Unix().SetDeadline(time.Now().Add(10 * time.Second))
	serr := c.Send(proto.TStatus, nil)
	t, body, files, err := c.Recv()
	if errors.Is(err, syscall.ECONNRESET) {
		t, body, files, err = c.Recv()
	}
	for _, f := range files {
		f.Close()
	}
	switch {
	case err == nil && t == proto.TStatusReply:
		return nil
	case err == nil && t == proto.TError:
		var e proto.Error
		json.Unmarshal(body, &e)
		return errors.New(e.Message)
	case err == nil:
		return fmt.Errorf("reply of type %d to a status request", t)
	case serr != nil:
		return serr
	}
	return err
}

// reserveFloodChild holds p.Conns connections (or as many as vnicd
// admits), each sending a status request every p.Interval; it reports
// (floodReport) once they are open and on each "report" line, and exits
// when its stdin closes.
func reserveFloodChild() int {
	p, ok := childSetup()
	if !ok {
		return 1
	}
	var (
		mu      sync.Mutex
		held    []*proto.Conn
		r       floodReport
		answers []atomic.Uint64
	)
	for p.Conns == 0 || len(held) < p.Conns {
		c, err := proto.Dial(p.Socket)
		if err != nil {
			fmt.Println("error: dial:", err)
			return 1
		}
		if err := status(c); err != nil {
			c.Close()
			if p.Conns > 0 {
				fmt.Printf("error: connection %d of %d: %v\n", len(held)+1, p.Conns, err)
				return 1
			}
			r.Refused = err.Error()
			break
		}
		if held = append(held, c); len(held) > 1024 {
			fmt.Println("error: vnicd admitted more than 1024 connections")
			return 1
		}
	}
	r.Held = len(held)
	answers = make([]atomic.Uint64, len(held))
	report := func() {
		mu.Lock()
		defer mu.Unlock()
		r.Answers = make([]uint64, len(answers))
		for i := range answers {
			r.Answers[i] = answers[i].Load()
		}
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
	}
	report()
	for i, c := range held {
		go func() {
			for {
				time.Sleep(p.Interval)
				if err := status(c); err != nil {
					mu.Lock()
					r.Closed = append(r.Closed, i)
					mu.Unlock()
					return
				}
				answers[i].Add(1)
			}
		}()
	}
	if p.Conns == 0 {
		go func() {
			for {
				time.Sleep(p.Interval)
				c, err := proto.Dial(p.Socket)
				if err != nil {
					continue
				}
				if status(c) == nil {
					mu.Lock()
					r.Extra++
					mu.Unlock()
				}
				c.Close()
			}
		}()
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		report()
	}
	return 0
}

// reserveClientChild asks for vnicd's status once and prints "ok" or
// "refused: " and why.
func reserveClientChild() int {
	p, ok := childSetup()
	if !ok {
		return 1
	}
	c, err := proto.Dial(p.Socket)
	if err != nil {
		fmt.Println("error: dial:", err)
		return 1
	}
	defer c.Close()
	if err := status(c); err != nil {
		fmt.Println("refused:", err)
		return 0
	}
	fmt.Println("ok")
	return 0
}

// child is a running child of the test binary.
type child struct {
	t     *testing.T
	role  string
	in    io.WriteCloser
	lines chan string
}

// startChild runs role as a child with p; the test's cleanup closes its
// stdin and waits for it.
func startChild(t *testing.T, role string, p childParams) *child {
	t.Helper()
	raw, _ := json.Marshal(p)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// Under -race a process sleeps a second at exit (GORACE's
	// atexit_sleep_ms) unless told otherwise.
	cmd.Env = append(os.Environ(), "VNIC_DAEMON_TEST_CHILD="+role, "VNIC_DAEMON_TEST_PARAMS="+string(raw),
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, role: role, in: in, lines: make(chan string, 256)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		in.Close()
		for range c.lines { // to the end of its output, then reap it
		}
		cmd.Wait()
	})
	return c
}

// line returns the child's next line of output.
func (c *child) line() string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("%s child exited", c.role)
		}
		return l
	case <-time.After(time.Minute): // a hang, not a slow machine
		c.t.Fatalf("%s child said nothing for a minute", c.role)
	}
	return ""
}

// flood reads a floodReport from the child (ask: after asking for one).
func (c *child) flood(ask bool) floodReport {
	c.t.Helper()
	if ask {
		if _, err := io.WriteString(c.in, "report\n"); err != nil {
			c.t.Fatal(err)
		}
	}
	l := c.line()
	var r floodReport
	if err := json.Unmarshal([]byte(l), &r); err != nil {
		c.t.Fatalf("%s child: %s", c.role, l)
	}
	return r
}

// runClient runs reserve-client as p's user and returns what it printed.
func runClient(t *testing.T, p childParams) string {
	t.Helper()
	return startChild(t, "reserve-client", p).line()
}

// requireRoot skips a test that switches users.
func requireRoot(t *testing.T) {
	if uid := os.Getuid(); uid != 0 {
		t.Skipf("needs uid 0 to run processes of other users (the test process is uid %d)", uid)
	}
}

// socketDir is a directory every user may reach and write, for a socket
// that processes of other users connect to (t.TempDir's parent is
// private).
func socketDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "vnicd-reserve-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitListening waits for vnicd in a child to listen on sock: it makes the
// socket 0660 after listen(2), and not before.
func waitListening(t *testing.T, sock string) {
	testutil.WaitFor(t, 20*time.Second, "vnicd to listen on "+sock, func() bool {
		fi, err := os.Lstat(sock)
		return err == nil && fi.Mode().Perm() == 0o660
	})
}

// waitNoConns waits until startDaemon's probe, the one connection it made,
// has been accepted (it may wait in the backlog after its dial returned)
// and its goroutine has ended, so that td holds no control connection and
// none is on its way.
func waitNoConns(t *testing.T, td *testDaemon) {
	testutil.WaitFor(t, 10*time.Second, "startDaemon's probe to be accepted and gone", func() bool {
		// accepted first: admit counts a connection before it counts it
		// as accepted
		accepted := td.d.Stats().Control["conns_accepted"]
		o, r, a := daemon.ConnCounts(td.d)
		return accepted == 1 && o+r+a == 0
	})
}

func rootStatus(t *testing.T, sock, what string) *proto.Conn {
	t.Helper()
	c, err := proto.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := status(c); err != nil {
		c.Close()
		t.Fatalf("root locked out %s: %v", what, err)
	}
	return c
}

// waitAnswering waits until each held connection of the flood that vnicd
// did not close has answered again since before.
func waitAnswering(t *testing.T, flood *child, before floodReport) floodReport {
	t.Helper()
	var r floodReport
	testutil.WaitFor(t, 20*time.Second, "every connection of the flood to answer again", func() bool {
		r = flood.flood(true)
		for i, n := range r.Answers {
			if !slices.Contains(r.Closed, i) && n <= before.Answers[i] {
				return false
			}
		}
		return true
	})
	return r
}

// TestReservedConnsNotForOwnUID: vnicd running as a user that is not root
// (nobody, in a child process) gives that user no reserve. A process of
// vnicd's own uid that opens connections until refused, and sends a
// status request on each every 200 ms (well within
// --first-message-timeout, 10 s here, so none is ever idle for it), holds the ordinary connections only; root's
// status answers on root's reserve while the flood goes on, and the
// flood loses nothing to it and gains nothing after it.
func TestReservedConnsNotForOwnUID(t *testing.T) {
	requireRoot(t)
	const perUID, reserve, nobody = 4, 2, 65534
	sock := filepath.Join(socketDir(t), "vnicd.sock")
	startChild(t, "reserve-daemon", childParams{Socket: sock, UID: nobody, GID: nobody,
		MaxConns: perUID, MaxConnsPerUID: perUID, ReservedConns: reserve, FirstMessageTimeout: 10 * time.Second})
	waitListening(t, sock)
	flood := startChild(t, "reserve-flood", childParams{Socket: sock, UID: nobody, GID: nobody, Interval: 200 * time.Millisecond})
	r := flood.flood(false)
	if r.Held != perUID {
		t.Fatalf("a process of vnicd's own uid holds %d connections, want %d (the ordinary ones, none of the reserve); then: %q", r.Held, perUID, r.Refused)
	}
	if !strings.Contains(r.Refused, "--max-conns") {
		t.Fatalf("the connection after the ordinary ones: %q, want a refusal naming --max-conns", r.Refused)
	}
	c := rootStatus(t, sock, "by a flood of vnicd's own uid")
	defer c.Close()
	var st proto.Stats
	c.Timeout = 10 * time.Second
	if _, err := c.Call(proto.TStats, nil, &st); err != nil {
		t.Fatal(err)
	}
	if got, ev := st.Control["conns_admitted_reserved"], st.Control["conns_evicted_reserved"]; got != 1 || ev != 0 {
		t.Fatalf("conns_admitted_reserved %d, conns_evicted_reserved %d; want root's one, nothing closed for it", got, ev)
	}
	after := waitAnswering(t, flood, r)
	if len(after.Closed) != 0 || after.Extra != 0 {
		t.Fatalf("the flood lost connections %v and gained %d once root was in, want none and none", after.Closed, after.Extra)
	}
}

// TestReservedConnsRootFlood: processes of root itself holding every
// ordinary connection uid 0 may have and the whole of root's reserve, each
// sending a request every 100 ms, do not lock root out: a new root
// connection takes the place of the reserved one idle longest, which
// vnicd closes, and answers at once (no connection of the flood times
// out: --first-message-timeout is a minute). The ordinary connections
// are left alone.
func TestReservedConnsRootFlood(t *testing.T) {
	requireRoot(t)
	const perUID, reserve = 3, 2
	td := startDaemon(t, testutil.NewPaced(0, time.Hour, 1), func(c *daemon.Config) {
		c.Limits.MaxConnsPerUID, c.Limits.ReservedConns = perUID, reserve
		c.Limits.FirstMessageTimeout = time.Minute
	})
	waitNoConns(t, td)
	type flooder struct {
		c       *proto.Conn
		answers atomic.Uint64
		closed  atomic.Bool
	}
	fl := make([]*flooder, perUID+reserve)
	for i := range fl {
		fl[i] = &flooder{c: rootStatus(t, td.socket, fmt.Sprintf("with %d connections of uid 0 open", i))}
		defer fl[i].c.Close()
	}
	if o, r, a := daemon.ConnCounts(td.d); o != perUID || r != reserve || a != 0 {
		t.Fatalf("%d ordinary, %d root-reserved, %d admin-reserved connections, want %d, %d, 0", o, r, a, perUID, reserve)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for _, f := range fl {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if err := status(f.c); err != nil {
					f.closed.Store(true)
					return
				}
				f.answers.Add(1)
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	c := rootStatus(t, td.socket, "by a flood of root's own")
	defer c.Close()
	ctl := td.d.Stats().Control
	if ev, to := ctl["conns_evicted_reserved"], ctl["first_message_timeouts"]; ev != 1 || to != 0 {
		t.Fatalf("conns_evicted_reserved %d, first_message_timeouts %d; want 1, 0", ev, to)
	}
	closed := func() (out []int) {
		for i, f := range fl {
			if f.closed.Load() {
				out = append(out, i)
			}
		}
		return out
	}
	testutil.WaitFor(t, 20*time.Second, "the flood to see a connection closed", func() bool { return len(closed()) > 0 })
	if got := closed(); len(got) != 1 || got[0] < perUID {
		t.Fatalf("vnicd closed the flood's connections %v, want one of the reserved ones (%d..%d)", got, perUID, perUID+reserve-1)
	}
	before := make([]uint64, len(fl))
	for i, f := range fl {
		before[i] = f.answers.Load()
	}
	testutil.WaitFor(t, 20*time.Second, "the flood's other connections to answer again", func() bool {
		for i, f := range fl {
			if !f.closed.Load() && f.answers.Load() <= before[i] {
				return false
			}
		}
		return true
	})
	if got := closed(); len(got) != 1 {
		t.Fatalf("vnicd closed the flood's connections %v, want one", got)
	}
	if o, r, _ := daemon.ConnCounts(td.d); o != perUID || r != reserve {
		t.Fatalf("%d ordinary and %d root-reserved connections, want %d and %d", o, r, perUID, reserve)
	}
}

// TestReservedConnsAdminGroup: with --admin-group, its members (by a
// supplementary group, read with SO_PEERGROUPS, or by their primary
// group) get a reserve beside root's. A member holding every ordinary
// connection and the whole of the group's reserve, each sending a request
// every 100 ms, does not reach root's: root answers without closing any
// of the member's connections. A user outside the group (in the socket's
// group, as tenants are) is refused, and another member takes the place
// of the member's reserved connection idle longest.
func TestReservedConnsAdminGroup(t *testing.T) {
	requireRoot(t)
	const (
		perUID, reserve  = 2, 2
		admin, socketGID = 4242, 4343 // need no name: vnicd is given gids
		member, other    = 65533, 65534
		primaryMember    = 65532
	)
	sock := filepath.Join(socketDir(t), "vnicd.sock")
	gid := uint32(admin)
	td := startDaemon(t, testutil.NewPaced(0, time.Hour, 1), func(c *daemon.Config) {
		c.Socket, c.SocketGroup, c.AdminGroup = sock, socketGID, &gid
		c.Limits.MaxConns, c.Limits.MaxConnsPerUID, c.Limits.ReservedConns = perUID, perUID, reserve
		c.Limits.FirstMessageTimeout = time.Minute
	})
	waitNoConns(t, td)
	flood := startChild(t, "reserve-flood", childParams{Socket: sock, UID: member, GID: member, Groups: []uint32{socketGID, admin},
		Conns: perUID + reserve, Interval: 100 * time.Millisecond})
	r := flood.flood(false)
	if o, rr, a := daemon.ConnCounts(td.d); r.Held != perUID+reserve || o != perUID || rr != 0 || a != reserve {
		t.Fatalf("a member of the admin group holds %d connections: %d ordinary, %d root-reserved, %d admin-reserved; want %d, 0, %d", r.Held, o, rr, a, perUID, reserve)
	}
	c := rootStatus(t, sock, "by a flood of the admin group")
	defer c.Close()
	if o, rr, a := daemon.ConnCounts(td.d); o != perUID || rr != 1 || a != reserve || td.d.Stats().Control["conns_evicted_reserved"] != 0 {
		t.Fatalf("with root in: %d ordinary, %d root-reserved, %d admin-reserved, %d closed for it; want %d, 1, %d, 0",
			o, rr, a, td.d.Stats().Control["conns_evicted_reserved"], perUID, reserve)
	}
	if out := runClient(t, childParams{Socket: sock, UID: other, GID: other, Groups: []uint32{socketGID}}); !strings.HasPrefix(out, "refused:") || !strings.Contains(out, "--max-conns") {
		t.Fatalf("a user outside the admin group: %q, want a refusal naming --max-conns", out)
	}
	if out := runClient(t, childParams{Socket: sock, UID: primaryMember, GID: admin, Groups: []uint32{socketGID}}); out != "ok" {
		t.Fatalf("a member by its primary group, the group's reserve full: %q, want its status", out)
	}
	if ev := td.d.Stats().Control["conns_evicted_reserved"]; ev != 1 {
		t.Fatalf("conns_evicted_reserved %d, want 1", ev)
	}
	var after floodReport
	testutil.WaitFor(t, 20*time.Second, "the flood to see a connection closed", func() bool {
		after = flood.flood(true)
		return len(after.Closed) > 0
	})
	if len(after.Closed) != 1 || after.Closed[0] < perUID {
		t.Fatalf("vnicd closed the member's connections %v, want one of its reserved ones (%d..%d)", after.Closed, perUID, perUID+reserve-1)
	}
	if final := waitAnswering(t, flood, after); len(final.Closed) != 1 {
		t.Fatalf("vnicd closed the member's connections %v, want one", final.Closed)
	}
}
