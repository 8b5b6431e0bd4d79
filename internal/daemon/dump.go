//go:build linux

package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/vnic/vnic/internal/proto"
	"github.com/vnic/vnic/nic"
)

// dumpSendTimeout ends a dump whose client has not taken a TDumpFrames
// message for this long (it is stopped, or stuck); the session's slot and
// mirror memory are then freed. Longer than --reply-timeout: a client
// piping into a slow reader (tshark starting up) may pause a while.
const dumpSendTimeout = 15 * time.Second

// dumpPoll bounds how long the dump loop sleeps without frames before it
// looks at its stop signal again (a wake-up arrives sooner with frames).
const dumpPoll = 200 * time.Millisecond

// dumpSession is one vnicctl dump: a mirror on one tenant and the
// connection that streams it.
type dumpSession struct {
	t        *tenant
	m        *nic.Mirror
	snap     int // the snaplen the client asked for, clamped to the buffer size
	pid      int32
	stop     chan struct{} // closed by end
	once     sync.Once
	reason   string // why it ended; written once, before stop is closed
	finished chan struct{}
}

// end asks the session to stop, giving why (the first reason wins).
func (s *dumpSession) end(reason string) {
	s.once.Do(func() {
		s.reason = reason
		close(s.stop)
	})
}

// dumpState is the daemon's dump bookkeeping.
type dumpState struct {
	live        map[*dumpSession]struct{} // under Daemon.mu
	endedDrops  atomic.Uint64             // mirror drops of ended sessions
	started     atomic.Uint64
	refusedLim  atomic.Uint64
	refusedPerm atomic.Uint64
	refusedBusy atomic.Uint64
	sent        atomic.Uint64
}

// controlSnapshot returns the control counters with the dump counters.
func (d *Daemon) controlSnapshot() map[string]uint64 {
	m := d.ctl.snapshot()
	m["dumps_started"] = d.dumps.started.Load()
	m["dumps_refused_limit"] = d.dumps.refusedLim.Load()
	m["dumps_refused_permission"] = d.dumps.refusedPerm.Load()
	m["dumps_refused_busy"] = d.dumps.refusedBusy.Load()
	m["dump_frames_sent"] = d.dumps.sent.Load()
	_, drops := d.dumpLive()
	m["dump_mirror_drops"] = drops
	d.holeCounters(m)
	return m
}

// dumpLive returns the running sessions and every mirror drop so far.
func (d *Daemon) dumpLive() (running int, drops uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	drops = d.dumps.endedDrops.Load()
	for s := range d.dumps.live {
		drops += s.m.Drops()
	}
	return len(d.dumps.live), drops
}

// mayDump reports whether a peer with uid may capture tenant t's frames:
// root, vnicd's own uid, or the uid that attached t. Members of the
// socket's group may attach and inspect counters, but not read another
// user's frames.
func mayDump(uid uint32, t *tenant) bool {
	return uid == 0 || uid == uint32(os.Geteuid()) || uid == t.info.UID
}

// findTenant finds a live tenant by name or decimal id (under mu).
func (d *Daemon) findTenant(key string) *tenant {
	if id, err := strconv.Atoi(key); err == nil {
		if t := d.live[id]; t != nil && t.nt != nil {
			return t
		}
	}
	var found *tenant // the lowest id of that name, as a listing shows first
	for _, t := range d.live {
		if t.nt != nil && t.info.Name == key && (found == nil || t.info.ID < found.info.ID) {
			found = t
		}
	}
	return found
}

// dumpRefusal is a refused dump: the error reply.
type dumpRefusal struct{ proto.Error }

func refuse(code, format string, a ...any) *dumpRefusal {
	return &dumpRefusal{proto.Error{Message: fmt.Sprintf(format, a...), Code: code}}
}

// startDump checks a Dump request and starts its session, or says why not.
func (d *Daemon) startDump(req proto.Dump, pid int32, uid uint32) (*dumpSession, *dumpRefusal) {
	lim := d.cfg.Limits
	switch {
	case req.Version < 1:
		return nil, refuse("", "dump request without a version; this vnicd speaks dump version %d", proto.DumpVersion)
	case req.Version > proto.DumpVersion:
		return nil, refuse("", "dump version %d; this vnicd speaks dump version %d: use a vnicctl from its release", req.Version, proto.DumpVersion)
	case req.Tenant == "":
		return nil, refuse("", "dump request names no tenant")
	case req.Snaplen < 0:
		return nil, refuse("", "snaplen %d: give a positive number of bytes, or 0 for whole frames", req.Snaplen)
	}
	d.mu.Lock()
	t := d.findTenant(req.Tenant)
	var why *dumpRefusal
	switch {
	case t == nil:
		why = refuse(proto.CodeNotFound, "no tenant %q is attached (vnicctl tenants lists them)", req.Tenant)
	case !mayDump(uid, t):
		d.dumps.refusedPerm.Add(1)
		why = refuse(proto.CodePermission, "uid %d may not capture tenant %q's frames: it belongs to uid %d; only that uid, root or vnicd's own user may dump it", uid, t.info.Name, t.info.UID)
	case req.Queue != nil && (*req.Queue < 0 || *req.Queue >= t.info.Queues):
		why = refuse("", "tenant %q has queues 0..%d; there is no queue %d", t.info.Name, t.info.Queues-1, *req.Queue)
	case t.dump != nil:
		d.dumps.refusedBusy.Add(1)
		why = refuse(proto.CodeBusy, "tenant %q is already being dumped (by pid %d); one dump per tenant at a time", t.info.Name, t.dump.pid)
	case len(d.dumps.live) >= lim.MaxDumps:
		d.dumps.refusedLim.Add(1)
		why = refuse(proto.CodeLimit, "vnicd runs %d dumps, its limit (--max-dumps); stop one or raise the flag", len(d.dumps.live))
	}
	if why != nil {
		d.mu.Unlock()
		return nil, why
	}
	buf := int(t.region.Geo.BufSize)
	snap := buf
	if req.Snaplen > 0 {
		snap = min(req.Snaplen, buf)
	}
	queue := -1
	if req.Queue != nil {
		queue = *req.Queue
	}
	m, err := nic.NewMirror(nic.MirrorConfig{Bytes: lim.DumpBufferBytes, Snaplen: max(snap, 64), Queue: queue})
	if err != nil {
		d.mu.Unlock()
		return nil, refuse(proto.CodeLimit, "%v (--dump-buffer %d bytes); ask for a smaller --snaplen", err, lim.DumpBufferBytes)
	}
	s := &dumpSession{t: t, m: m, snap: snap, pid: pid, stop: make(chan struct{}), finished: make(chan struct{})}
	t.dump = s
	d.dumps.live[s] = struct{}{}
	d.mu.Unlock()
	if err := d.eng.AttachMirror(t.nt, m); err != nil { // the tenant left meanwhile
		d.endDump(s)
		return nil, refuse(proto.CodeNotFound, "tenant %q detached: %v", t.info.Name, err)
	}
	d.dumps.started.Add(1)
	return s, nil
}

// endDump removes a session from the books; its mirror must be detached
// from the engine (or never attached).
func (d *Daemon) endDump(s *dumpSession) {
	d.mu.Lock()
	delete(d.dumps.live, s)
	if s.t.dump == s {
		s.t.dump = nil
	}
	d.dumps.endedDrops.Add(s.m.Drops())
	d.mu.Unlock()
}

// endTenantDump ends a tenant's dump when it detaches (after the engine
// removed it: what was delivered before is still sent).
func (d *Daemon) endTenantDump(t *tenant) {
	d.mu.Lock()
	s := t.dump
	d.mu.Unlock()
	if s != nil {
		s.end("tenant detached")
	}
}

// endAllDumps ends every session because vnicd stops and waits (at most
// wait) for them to send their end.
func (d *Daemon) endAllDumps(wait time.Duration) {
	d.mu.Lock()
	var all []*dumpSession
	for s := range d.dumps.live {
		all = append(all, s)
	}
	d.mu.Unlock()
	deadline := time.After(wait)
	for _, s := range all {
		s.end("vnicd stopping")
	}
	for _, s := range all {
		select {
		case <-s.finished:
		case <-deadline:
			return
		}
	}
}

// serveDump runs a dump on conn: the reply, then frames until the session
// ends, then TDumpEnd. The connection is closed by the caller afterwards.
func (d *Daemon) serveDump(conn *proto.Conn, body []byte, pid int32, uid uint32, log zerolog.Logger, reply func(proto.Type, any, ...int) bool) {
	var req proto.Dump
	if err := json.Unmarshal(body, &req); err != nil {
		d.ctl.badRequests.Add(1)
		reply(proto.TError, proto.Error{Message: fmt.Sprintf("dump request is not valid JSON: %v", err)})
		return
	}
	s, why := d.startDump(req, pid, uid)
	if why != nil {
		if why.Code == "" {
			d.ctl.badRequests.Add(1)
		}
		reply(proto.TError, why.Error)
		return
	}
	defer close(s.finished)
	t, m := s.t, s.m
	rep := proto.DumpReply{Version: proto.DumpVersion, Tenant: t.info.ID, Name: t.info.Name, Queues: t.info.Queues, Queue: req.Queue,
		Snaplen: s.snap, Slots: m.Slots(), Bytes: m.Bytes(), Start: time.Now().UnixNano()}
	snap := s.snap
	dlog := log.With().Int("tenant", t.info.ID).Str("name", t.info.Name).Logger()
	dlog.Info().Int("tenant_uid", int(t.info.UID)).Interface("queue", req.Queue).Int("snaplen", snap).Int("slots", m.Slots()).
		Int64("mirror_bytes", m.Bytes()).Uint64("count", req.Count).Msg("dump started: copying the frames delivered to this tenant")
	if !reply(proto.TDumpReply, rep) {
		s.end("client did not take the reply")
		d.eng.DetachMirror(t.nt, m)
		d.endDump(s)
		return
	}
	// The client's side: TDumpStop, or the connection closing, ends it.
	go func() {
		for {
			t, _, files, err := conn.Recv()
			for _, f := range files {
				f.Close()
			}
			switch {
			case err != nil:
				s.end("client closed the connection")
				return
			case t == proto.TDumpStop:
				s.end("stopped by the client")
				return
			default:
				d.ctl.badRequests.Add(1)
				s.end(fmt.Sprintf("client sent request type %d during the dump", t))
				return
			}
		}
	}()
	var (
		sent    uint64
		data    = make([]byte, 0, proto.DumpFramesBytes+snap)
		batch   proto.DumpFrames
		sendErr error
	)
	batch.Frames = make([]proto.DumpFrame, 0, 256)
	full := func() bool {
		return len(data) >= proto.DumpFramesBytes || len(batch.Frames) == cap(batch.Frames) ||
			req.Count > 0 && sent+uint64(len(batch.Frames)) >= req.Count
	}
	take := func(r *nic.MirrorRecord) bool {
		n := min(len(r.Data), snap)
		off := len(data)
		data = append(data, r.Data[:n]...)
		batch.Frames = append(batch.Frames, proto.DumpFrame{Queue: r.Queue, Time: r.Time.UnixNano(), Len: r.WireLen, Data: data[off : off+n]})
		return !full()
	}
	// send sends what the mirror holds. Unless final, it returns once
	// the session is asked to end: a producer faster than the client
	// would otherwise keep it here.
	send := func(final bool) bool {
		for sendErr == nil && (req.Count == 0 || sent < req.Count) {
			if !final {
				select {
				case <-s.stop:
					return true
				default:
				}
			}
			data, batch.Frames = data[:0], batch.Frames[:0]
			if m.Read(take) == 0 {
				return true
			}
			batch.Dropped = m.Drops()
			conn.Unix().SetWriteDeadline(time.Now().Add(dumpSendTimeout))
			if sendErr = conn.Send(proto.TDumpFrames, &batch); sendErr != nil {
				return false
			}
			sent += uint64(len(batch.Frames))
			d.dumps.sent.Add(uint64(len(batch.Frames)))
		}
		return sendErr == nil
	}
	reason := ""
loop:
	for {
		m.Wait(s.stop, dumpPoll)
		if !send(false) {
			var ne interface{ Timeout() bool }
			if errors.As(sendErr, &ne) && ne.Timeout() {
				s.end("client too slow: it took no frames for " + dumpSendTimeout.String())
			} else {
				s.end("client closed the connection")
			}
		}
		if req.Count > 0 && sent >= req.Count {
			s.end("count reached")
		}
		select {
		case <-s.stop:
			break loop
		default:
		}
	}
	reason = s.reason
	d.eng.DetachMirror(t.nt, m) // a no-op once the tenant was removed
	if sendErr == nil && reason != "client closed the connection" {
		send(true) // what the mirror took before it was detached
	}
	d.endDump(s)
	end := proto.DumpEnd{Reason: reason, Mirrored: m.Mirrored(), Dropped: m.Drops(), Sent: sent, End: time.Now().UnixNano()}
	for q := 0; q < t.info.Queues; q++ {
		end.QueueDropped = append(end.QueueDropped, m.QueueDrops(q))
	}
	if sendErr == nil {
		reply(proto.TDumpEnd, end)
	}
	dlog.Info().Str("why", reason).Uint64("mirrored", end.Mirrored).Uint64("dropped", end.Dropped).Uint64("sent", sent).Msg("dump ended")
}
