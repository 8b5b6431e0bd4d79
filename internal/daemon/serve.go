//go:build linux

package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/vnic/vnic/internal/proto"
)

// serve answers the requests of one admitted connection until it ends,
// then detaches the tenant it holds and gives back its place under the
// connection caps.
func (d *Daemon) serve(conn *proto.Conn, pid int32, st *connState) {
	defer d.conns.Done()
	uid, reserved := st.uid, st.reserved
	log := d.log.With().Int32("peer_pid", pid).Uint32("peer_uid", uid).Logger()
	log.Debug().Msg("control connection")
	lim := d.cfg.Limits
	var mine *tenant
	defer func() {
		conn.Close()
		d.mu.Lock()
		delete(d.open, conn)
		if reserved {
			delete(d.reserve[st.class], conn) // gone already if it made room
		} else {
			d.ordinary--
			if d.byUID[uid]--; d.byUID[uid] <= 0 {
				delete(d.byUID, uid)
			}
		}
		d.mu.Unlock()
		if mine != nil {
			d.detachID(mine.info.ID, "connection closed")
		}
	}()
	// reply sends one message within the reply deadline; a peer that does
	// not take its replies is disconnected (false).
	reply := func(t proto.Type, body any, fds ...int) bool {
		conn.Unix().SetWriteDeadline(time.Now().Add(lim.ReplyTimeout))
		err := conn.Send(t, body, fds...)
		if err == nil {
			return true
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			d.ctl.replyTimeouts.Add(1)
			const msg = "client did not read its reply in time (--reply-timeout); disconnecting it"
			if ev := d.warn(log, uid, msg); ev != nil {
				ev.Dur("reply_timeout", lim.ReplyTimeout).Msg(msg)
			}
		} else {
			log.Debug().Err(err).Msg("reply failed; closing the connection")
		}
		return false
	}
	conn.Unix().SetReadDeadline(time.Now().Add(lim.FirstMessageTimeout))
	for first := true; ; first = false {
		t, body, files, err := conn.Recv()
		for _, f := range files {
			f.Close() // clients send no descriptors
		}
		st.last.Store(d.clock())
		if reserved {
			// A reserved connection serves the operator's commands: it
			// may sit idle no longer than before its first request.
			conn.Unix().SetReadDeadline(time.Now().Add(lim.FirstMessageTimeout))
		} else if first {
			conn.Unix().SetReadDeadline(time.Time{})
		}
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, proto.ErrVersion):
				reply(proto.TError, proto.Error{Message: err.Error(), Version: proto.Version})
				const msg = "client speaks another protocol version"
				if ev := d.warn(log, uid, msg); ev != nil {
					ev.Err(err).Msg(msg)
				}
			case errors.Is(err, proto.ErrTooLarge):
				d.ctl.tooLarge.Add(1)
				reply(proto.TError, proto.Error{Message: fmt.Sprintf("request too large (%v); vnicd accepts requests of at most %d bytes", err, proto.MaxRequest)})
				const msg = "client sent an oversized request; disconnecting it"
				if ev := d.warn(log, uid, msg); ev != nil {
					ev.Err(err).Msg(msg)
				}
			case (first || reserved) && errors.As(err, &ne) && ne.Timeout():
				d.ctl.firstMessageTimeouts.Add(1)
				log.Debug().Dur("timeout", lim.FirstMessageTimeout).Msg("client sent nothing in time (--first-message-timeout); disconnecting it")
			case !errors.Is(err, proto.ErrClosed) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF):
				d.ctl.badRequests.Add(1)
				log.Debug().Err(err).Msg("control connection ended")
			}
			return
		}
		var rerr error
		ok := true
		switch t {
		case proto.TAttach:
			if mine != nil {
				rerr = errors.New("this connection already holds a tenant; open another connection for a second one")
				break
			}
			if reserved {
				rerr = fmt.Errorf("the ordinary control connections are taken (--max-conns-per-uid for uid %d, or --max-conns), and this one is on the reserve of root or --admin-group (--reserved-conns), which serves commands, not tenants; close idle connections first", uid)
				break
			}
			var req proto.Attach
			if rerr = json.Unmarshal(body, &req); rerr != nil {
				rerr = fmt.Errorf("attach request is not valid JSON: %w", rerr)
				break
			}
			mine, rerr = d.attach(conn, req, pid, uid, log, reply)
			if rerr == errReplyFailed {
				return
			}
		case proto.TDetach:
			if mine != nil {
				d.detachID(mine.info.ID, "detach requested")
				mine = nil
			}
			ok = reply(proto.TOK, nil)
		case proto.TTenants:
			var pg proto.Page
			if rerr = decodePage(body, &pg); rerr == nil {
				ok = reply(proto.TTenantsRep, d.tenantsPage(pg))
			}
		case proto.TStats:
			var pg proto.Page
			if rerr = decodePage(body, &pg); rerr == nil {
				ok = reply(proto.TStatsReply, d.statsPage(pg))
			}
		case proto.TStatus:
			ok = reply(proto.TStatusReply, d.status())
		case proto.TConfig:
			ok = reply(proto.TConfigReply, d.config())
		case proto.TDump:
			if mine != nil {
				rerr = errors.New("this connection holds a tenant; dump on another connection")
				break
			}
			d.serveDump(conn, body, pid, uid, log, reply)
			return // the connection ends with the dump
		default:
			rerr = fmt.Errorf("unknown request type %d", t)
		}
		if rerr != nil {
			if t != proto.TAttach {
				d.ctl.badRequests.Add(1)
			}
			ok = reply(proto.TError, proto.Error{Message: rerr.Error()})
		}
		if !ok {
			return
		}
	}
}

// decodePage reads a page request (an empty body asks for the first page).
func decodePage(body []byte, pg *proto.Page) error {
	if len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, pg); err != nil {
		return fmt.Errorf("page request is not valid JSON: %w", err)
	}
	return nil
}
