//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/vnic/vnic/internal/proto"
)

// acceptLoop accepts control connections until ctx ends (nil) or the
// listener fails for good (the error). Errors a busy machine recovers from
// (out of descriptors or memory, an aborted connection) are logged at warn,
// counted as accept_errors and retried after a back-off of 5 ms doubling to
// 1 s, so a burst of clients never stops vnicd.
func (d *Daemon) acceptLoop(ctx context.Context) error {
	var backoff time.Duration
	for {
		c, err := d.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !transientAccept(err) {
				return fmt.Errorf("accept on %s: %w", d.cfg.Socket, err)
			}
			d.ctl.acceptErrors.Add(1)
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			d.log.Warn().Err(err).Dur("retry_in", backoff).Uint64("accept_errors", d.ctl.acceptErrors.Load()).
				Msg("accept failed; retrying (raise LimitNOFILE, or lower --max-conns, if this repeats)")
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		d.admit(c)
	}
}

// transientAccept reports whether an accept error is worth retrying.
func transientAccept(err error) bool {
	for _, e := range []error{unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM, unix.ECONNABORTED, unix.EINTR, unix.EAGAIN, unix.EPROTO, unix.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// admit applies the connection caps to an accepted connection and starts
// serving it, or tells the peer which limit refused it and closes it. A
// peer of a class with a reserve (reserve.go) gets a reserved connection
// once the caps refuse it an ordinary one, in place of its reserve's
// idlest connection when the reserve is full.
func (d *Daemon) admit(c *net.UnixConn) {
	cred, ok := d.peer(c)
	pid, uid := cred.pid, cred.uid
	conn := proto.NewServerConn(c, proto.MaxRequest)
	lim := d.cfg.Limits
	st := &connState{uid: uid, class: classify(uid, cred.gid, cred.groups, d.cfg.AdminGroup)}
	var (
		refuse string
		victim *proto.Conn
		vst    *connState
	)
	d.mu.Lock()
	over := lim.MaxConns > 0 && d.ordinary >= lim.MaxConns
	overUID := lim.MaxConnsPerUID > 0 && d.byUID[uid] >= lim.MaxConnsPerUID
	switch {
	case !ok:
		refuse = "vnicd could not read this connection's credentials (SO_PEERCRED), so it does not know whom it would serve"
	case !over && !overUID:
		d.ordinary++
		d.byUID[uid]++
	case st.class != classOrdinary && lim.ReservedConns > 0:
		res := d.reserve[st.class]
		if len(res) >= lim.ReservedConns {
			victim = idlest(res)
			vst = res[victim]
			delete(res, victim) // its serve ends on the close below
			d.ctl.evictedConns.Add(1)
		}
		st.reserved = true
		res[conn] = st
		d.ctl.reservedConns.Add(1)
	case over:
		d.ctl.refusedConns.Add(1)
		refuse = fmt.Sprintf("vnicd has %d control connections open, its limit (--max-conns); close idle ones or raise the flag", d.ordinary)
	default:
		d.ctl.refusedConnsUID.Add(1)
		refuse = fmt.Sprintf("uid %d has %d control connections open to vnicd, the per-uid limit (--max-conns-per-uid); close idle ones or raise the flag", uid, d.byUID[uid])
	}
	now := d.clock()
	if refuse == "" {
		d.connSeq++
		st.seq = d.connSeq
		st.last.Store(now)
		d.open[conn] = st
		d.conns.Add(1)
	}
	d.mu.Unlock()
	d.ctl.accepted.Add(1)
	if refuse != "" {
		c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		conn.Send(proto.TError, proto.Error{Message: refuse})
		c.Close()
		d.log.Debug().Int32("peer_pid", pid).Uint32("peer_uid", uid).Msg(refuse)
		return
	}
	if victim != nil {
		victim.Close()
		const msg = "closed the reserved control connection idle longest to make room for a newer one of its class (--reserved-conns)"
		if ev := d.warn(d.log, vst.uid, msg); ev != nil {
			ev.Str("class", st.class.String()).Uint32("closed_uid", vst.uid).Dur("closed_idle", time.Duration(now-vst.last.Load())).
				Int32("peer_pid", pid).Uint32("peer_uid", uid).Msg(msg)
		}
	}
	go d.serve(conn, pid, st)
}

// clock is the daemon's monotonic clock (connState.last), in nanoseconds.
func (d *Daemon) clock() int64 { return int64(time.Since(d.start)) }

// warn returns a warning event for something client uid caused, or nil
// when the limiter suppresses it (Limits.LogBurst per LogInterval per
// uid and reason; reason is the line's message, a constant). The first
// line after suppressed ones carries their count.
func (d *Daemon) warn(log zerolog.Logger, uid uint32, reason string) *zerolog.Event {
	ok, n := d.logLim.allow(logKey{uid, reason})
	if !ok {
		d.ctl.logSuppressed.Add(1)
		return nil
	}
	ev := log.Warn()
	if n > 0 {
		ev = ev.Uint64("suppressed_before", n)
	}
	return ev
}

// logSummaries logs, once per Limits.LogInterval, one line per uid and
// reason whose warnings were suppressed in the interval that ended.
func (d *Daemon) logSummaries(ctx context.Context) {
	t := time.NewTicker(d.cfg.Limits.LogInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, s := range d.logLim.due() {
			d.log.Warn().Uint32("peer_uid", s.key.uid).Uint64("suppressed", s.suppressed).Str("reason", s.key.reason).
				Msgf("suppressed %d similar messages in the last %v: %s", s.suppressed, d.cfg.Limits.LogInterval, s.key.reason)
		}
	}
}

// peerCred is what the kernel recorded of a control connection's peer
// when it connected.
type peerCred struct {
	pid      int32
	uid, gid uint32   // effective (SO_PEERCRED)
	groups   []uint32 // supplementary (SO_PEERGROUPS), read only when they matter
}

// peer reads c's peer credentials (false: they could not be read). The
// supplementary groups are read only when they decide the class: with
// --admin-group, for a peer that is not root and whose effective gid is
// not the group. On a kernel without SO_PEERGROUPS only the effective gid
// counts (vnicd warns once).
func (d *Daemon) peer(c *net.UnixConn) (cred peerCred, ok bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return cred, false
	}
	admin := d.cfg.AdminGroup
	raw.Control(func(fd uintptr) {
		uc, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			return
		}
		cred, ok = peerCred{pid: uc.Pid, uid: uc.Uid, gid: uc.Gid}, true
		if admin == nil || uc.Uid == 0 || uc.Gid == *admin {
			return
		}
		cred.groups, err = peerGroups(int(fd))
		switch {
		case errors.Is(err, unix.ENOPROTOOPT):
			d.noPeerGroups.Do(func() {
				d.log.Warn().Uint32("admin_group", *admin).Msg("this kernel cannot tell a peer's supplementary groups (SO_PEERGROUPS, Linux 4.13); only peers whose primary group is --admin-group count as its members")
			})
		case err != nil:
			d.log.Debug().Err(err).Int32("peer_pid", uc.Pid).Msg("could not read the peer's supplementary groups; only its primary group counts")
		}
	})
	return cred, ok
}
