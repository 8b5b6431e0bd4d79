package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/proto"
)

// defaultSocket is where vnicd listens unless told otherwise.
const defaultSocket = "/run/vnic/vnicd.sock"

// callTimeout bounds one request to vnicd, so a stuck daemon cannot hang
// vnicctl (or a script calling it).
const callTimeout = 5 * time.Second

// Exit statuses other than 1 (a generic failure), so scripts can tell why
// vnicctl failed without parsing its message. exitHelp lists them.
const (
	exitUsage      = 2 // a wrong command, flag or argument
	exitNotRunning = 3 // like LSB "program is not running"
	exitPermission = 4 // like LSB "user had insufficient privilege"
	exitNotFound   = 5 // the tenant (or other object) asked for does not exist
)

// exitHelp documents the exit statuses in --help.
const exitHelp = `EXIT STATUS:
   0  success
   1  any other failure (vnicd answered with an error, a request timed out, ...)
   2  usage: unknown command, bad flag or argument value
   3  vnicd is not running (no socket, or nothing listens on it)
   4  permission denied on vnicd's socket (join its group, or use sudo)
   5  not found: no tenant with that name or id`

// usageError is a mistake on the command line (exit status 2).
func usageError(format string, a ...any) error {
	return &ctlError{code: exitUsage, msg: fmt.Sprintf(format, a...)}
}

// notFoundError is an object the user named that does not exist (exit
// status 5).
func notFoundError(format string, a ...any) error {
	return &ctlError{code: exitNotFound, msg: fmt.Sprintf(format, a...)}
}

// ctlError is an error with an exit status for main.
type ctlError struct {
	msg  string
	code int
	err  error
}

func (e *ctlError) Error() string { return e.msg }
func (e *ctlError) Unwrap() error { return e.err }
func (e *ctlError) ExitCode() int { return e.code }

// globalSocketFlag is the app-wide --socket, read from VNIC_SOCKET too.
func globalSocketFlag() cli.Flag {
	return &cli.StringFlag{Name: "socket", Value: defaultSocket, EnvVars: []string{"VNIC_SOCKET"},
		Usage: "vnicd's control socket"}
}

// socketFlag is the per-command --socket; it has no default so that the
// global flag (or VNIC_SOCKET) applies when it is not given.
func socketFlag() cli.Flag {
	return &cli.StringFlag{Name: "socket", Usage: "vnicd's control socket (default: the global --socket)"}
}

// socketPath resolves --socket: the command's own flag, then the global one.
func socketPath(c *cli.Context) string {
	for _, ctx := range c.Lineage() {
		if s := ctx.String("socket"); s != "" {
			return s
		}
	}
	return defaultSocket
}

// startHint is the command that starts vnicd on path.
func startHint(path string) string {
	if path == defaultSocket {
		return "sudo vnicd run --source synth"
	}
	return "sudo vnicd run --socket " + path + " --source synth"
}

// dial connects to vnicd, turning the usual failures into one sentence
// that says what to do.
func dial(path string) (*proto.Conn, error) {
	conn, err := proto.Dial(path)
	if err == nil {
		return conn, nil
	}
	return nil, dialError(path, err)
}

func dialError(path string, err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &ctlError{code: exitNotRunning, err: err,
			msg: fmt.Sprintf("vnicd is not running (no socket at %s); start it with: %s", path, startHint(path))}
	case errors.Is(err, syscall.ECONNREFUSED) && !isSocket(path):
		return &ctlError{code: 1, err: err,
			msg: fmt.Sprintf("%s is not a socket, so not vnicd's; give vnicd's socket with --socket or VNIC_SOCKET (default %s)", path, defaultSocket)}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &ctlError{code: exitNotRunning, err: err,
			msg: fmt.Sprintf("vnicd is not running (nothing listens on %s, a stale socket left by a vnicd that did not stop cleanly); start it with: %s", path, startHint(path))}
	case errors.Is(err, os.ErrPermission):
		return &ctlError{code: exitPermission, err: err, msg: permissionHint(path, socketGroup(path))}
	case errors.Is(err, syscall.EPROTOTYPE), errors.Is(err, syscall.ENOTSOCK):
		return &ctlError{code: 1, err: err,
			msg: fmt.Sprintf("%s is not vnicd's control socket; give the right one with --socket or VNIC_SOCKET", path)}
	}
	return &ctlError{code: 1, err: err, msg: fmt.Sprintf("connect to vnicd at %s: %v", path, err)}
}

// permissionHint tells a user refused by the socket at path which group
// to join: the socket's own (vnicd --socket-group), or its directory's.
func permissionHint(path, group string) string {
	switch group {
	case "":
		return fmt.Sprintf("no permission to connect to vnicd at %s; join the group that owns it (ls -l %s) or use sudo", path, path)
	case "root":
		return fmt.Sprintf("no permission to connect to vnicd at %s: it belongs to group root, so only root may use it; restart vnicd with --socket-group GROUP (e.g. vnic) and join that group, or use sudo", path)
	}
	return fmt.Sprintf("no permission to connect to vnicd at %s; join its group %s (sudo usermod -aG %s $USER, then log in again) or use sudo", path, group, group)
}

func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// ctlConn is one control connection, used by a command for its requests.
type ctlConn struct {
	path string
	conn *proto.Conn
}

func connect(c *cli.Context) (*ctlConn, error) {
	path := socketPath(c)
	conn, err := dial(path)
	if err != nil {
		return nil, err
	}
	return &ctlConn{path: path, conn: conn}, nil
}

func (cl *ctlConn) Close() error { return cl.conn.Close() }

// call sends one request without a body and decodes its reply, within
// callTimeout.
func (cl *ctlConn) call(t proto.Type, out any) error { return cl.callWith(t, nil, out) }

// callWith sends one request with body req (nil: none) and decodes its
// reply, within callTimeout.
func (cl *ctlConn) callWith(t proto.Type, req, out any) error {
	cl.conn.Timeout = callTimeout // per page of a paginated reply
	files, err := cl.conn.Call(t, req, out)
	for _, f := range files {
		f.Close() // no reply vnicctl asks for carries descriptors
	}
	if err == nil {
		return nil
	}
	return cl.callError(err)
}

// callError turns a failed request into one sentence (and exit status).
func (cl *ctlConn) callError(err error) error {
	var perr *proto.Error
	var nerr net.Error
	switch {
	case errors.As(err, &perr):
		switch perr.Code {
		case proto.CodeNotFound:
			return notFoundError("%s", perr.Message)
		case proto.CodePermission:
			return &ctlError{code: exitPermission, err: err, msg: perr.Message}
		}
		if perr.Code == "" && strings.HasPrefix(perr.Message, "unknown request type ") {
			return fmt.Errorf("this vnicd is too old for this command (%s); upgrade it", perr.Message)
		}
		return fmt.Errorf("vnicd refused the request: %s", perr.Message)
	case errors.Is(err, proto.ErrVersion):
		return err
	case errors.As(err, &nerr) && nerr.Timeout():
		return fmt.Errorf("vnicd at %s did not answer within %v; it may be stuck: see journalctl -u vnicd", cl.path, callTimeout)
	case errors.Is(err, proto.ErrClosed), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return &ctlError{code: exitNotRunning, err: err,
			msg: fmt.Sprintf("vnicd closed the connection on %s (it stopped or restarted); start it with: %s", cl.path, startHint(cl.path))}
	}
	return fmt.Errorf("talk to vnicd at %s: %w", cl.path, err)
}

func (cl *ctlConn) stats() (proto.Stats, error) {
	var st proto.Stats
	err := cl.call(proto.TStats, &st)
	return st, err
}

// request runs one request on a fresh connection.
func request(c *cli.Context, t proto.Type, out any) error {
	cl, err := connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.call(t, out)
}

// Output formats, the same on every command: text (tables that fit in
// 80 columns), wide (every column) and json (for scripts).
const (
	outText = "text"
	outWide = "wide"
	outJSON = "json"
)

// outputFlag is -o/--output: text, wide or json.
func outputFlag() cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: outText,
		Usage: "output format: text (fits in 80 columns), wide (every column) or json"}
}

// outputFormat checks -o; "table", the old name of text, is still read.
func outputFormat(c *cli.Context) (string, error) {
	switch o := c.String("output"); o {
	case outText, "table", "":
		return outText, nil
	case outWide, outJSON:
		return o, nil
	default:
		return "", usageError("-o %q: use text, wide or json", o)
	}
}

// writeJSON prints v indented, with a final newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// isClientID reports whether id is written by the tenant's receive queue
// (the client block) rather than by the emulated NIC.
func isClientID(id counters.ID) bool { return id >= counters.Received && id <= counters.OrderErrors }

// snapshot converts counters from the wire; names this build does not know
// (a newer vnicd) are skipped.
func snapshot(m map[string]uint64) counters.Snapshot {
	var s counters.Snapshot
	for name, v := range m {
		if id, ok := counters.ByName(name); ok {
			s[id] = v
		}
	}
	return s
}

// ringSnapshot merges one ring's NIC-side and client-side counters: the
// client block owns Received..OrderErrors, the NIC block the rest.
func ringSnapshot(r proto.RingStats) counters.Snapshot {
	s := snapshot(r.NIC)
	c := snapshot(r.Client)
	for id := counters.ID(0); id < counters.NumIDs; id++ {
		if isClientID(id) {
			s[id] = c[id]
		}
	}
	return s
}

// ringColumns are the columns of vnicctl rings and watch: the daemon's
// per-ring table plus what the tenant's queues count.
var ringColumns = append(append([]counters.ID(nil), counters.RingColumns...),
	counters.DropFaulty, counters.DropPauseTimeout, counters.Received, counters.Refills, counters.AllocFailures, counters.Handoffs)

// tenantLabel names a tenant in tables: its name, or #ID when it has none
// or shares it with another tenant.
func tenantLabel(t proto.TenantInfo, dup map[string]int) string {
	if t.Name == "" {
		return "#" + strconv.Itoa(t.ID)
	}
	if dup[t.Name] > 1 {
		return displayName(t.Name) + "#" + strconv.Itoa(t.ID)
	}
	return displayName(t.Name)
}

// displayName is a tenant name safe for a terminal: vnicd refuses names
// with anything but letters, digits and . _ - : @ +, but an older or
// foreign daemon might not, so anything else (escape sequences, newlines
// that would forge rows, spaces that would split columns) is shown quoted
// and escaped.
func displayName(n string) string {
	for _, r := range n {
		if r <= ' ' || r > '~' {
			return strconv.QuoteToASCII(n)
		}
	}
	return n
}

func nameCounts(ts []proto.TenantStats) map[string]int {
	m := map[string]int{}
	for _, t := range ts {
		m[t.Name]++
	}
	return m
}

// selectTenants keeps the tenants that sel names (an ID or a name); an
// empty sel keeps them all.
func selectTenants(ts []proto.TenantStats, sel string) []proto.TenantStats {
	if sel == "" {
		return ts
	}
	id, err := strconv.Atoi(strings.TrimPrefix(sel, "#"))
	var out []proto.TenantStats
	for _, t := range ts {
		if t.Name == sel || err == nil && t.ID == id {
			out = append(out, t)
		}
	}
	return out
}

// dash shows an empty value as "-" in tables.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
