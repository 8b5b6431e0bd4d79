package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/internal/buildinfo"
	"github.com/vnic/vnic/internal/pcapng"
	"github.com/vnic/vnic/internal/proto"
)

// dumpEndWait bounds how long vnicctl dump waits, after asking vnicd to
// stop (Ctrl-C), for each next message of the stream: vnicd first sends
// what its mirror ring still holds, then the end.
const dumpEndWait = 5 * time.Second

func dumpCommand() *cli.Command {
	return &cli.Command{
		Name:  "dump",
		Usage: "capture the frames vnicd delivers to a tenant into a pcapng file (tcpdump, tshark and Wireshark read it)",
		UsageText: "vnicctl dump --tenant NAME|ID [--queue Q] [--count N] [--snaplen S] -w FILE.pcapng\n" +
			"vnicctl dump --tenant app --count 1000 -w app.pcapng\n" +
			"vnicctl dump --tenant app -w - | tshark -r - -Y udp\n\n" +
			"A copy of each frame as vnicd put it on one of the tenant's queues (after RSS steering), in the\n" +
			"way of dpdk-pdump and xdpdump. Each queue is an interface of the file (NAME/qN), and each\n" +
			"frame's time is when vnicd delivered it. vnicd copies frames into a mirror ring of bounded size\n" +
			"(vnicd run --dump-buffer); frames that find it full are not captured, and are counted in the\n" +
			"file's interface statistics (ifdrop), in the summary, and in vnicctl counters\n" +
			"(dump_mirror_drops). The tenant gets every frame either way.\n\n" +
			"It ends after --count frames, on Ctrl-C (the file is completed), when the tenant detaches, or\n" +
			"when vnicd stops. Only root, vnicd's user and the user that attached the tenant may dump it.\n" +
			"The summary goes to stderr (-o json: a JSON object on stdout, or on stderr with -w -).",
		Flags: []cli.Flag{
			socketFlag(),
			outputFlag(),
			&cli.StringFlag{Name: "tenant", Aliases: []string{"t"}, Usage: "the tenant to capture: its name or id (vnicctl tenants); required"},
			&cli.IntFlag{Name: "queue", Aliases: []string{"q"}, Value: -1, DefaultText: "every queue", Usage: "capture only this queue"},
			&cli.Uint64Flag{Name: "count", Aliases: []string{"c"}, DefaultText: "until Ctrl-C", Usage: "stop after this many frames"},
			&cli.IntFlag{Name: "snaplen", Aliases: []string{"s"}, DefaultText: "whole frames", Usage: "keep at most this many bytes of each frame"},
			&cli.StringFlag{Name: "write", Aliases: []string{"w"}, Usage: "the pcapng file to write, or - for stdout; required"},
		},
		Action: runDump,
	}
}

// dumpSummary is what vnicctl dump reports when it ends.
type dumpSummary struct {
	Tenant   string `json:"tenant"`
	File     string `json:"file"`
	Frames   uint64 `json:"frames"`   // written to the file
	Dropped  uint64 `json:"dropped"`  // not captured: the mirror ring was full
	Mirrored uint64 `json:"mirrored"` // copied by vnicd
	Reason   string `json:"reason"`
}

func runDump(c *cli.Context) error {
	format, err := outputFormat(c)
	if err != nil {
		return err
	}
	if c.NArg() > 0 {
		return usageError("vnicctl dump takes no arguments (got %q); vnicctl dump --help lists its flags", c.Args().First())
	}
	queue, count, snaplen, path := c.Int("queue"), c.Uint64("count"), c.Int("snaplen"), c.String("write")
	if queue < -1 {
		return usageError("--queue %d: give a queue number (0, 1, ...), or leave it out for every queue", queue)
	}
	if snaplen < 0 {
		return usageError("--snaplen %d: give a positive number of bytes, or leave it out for whole frames", snaplen)
	}
	if c.String("tenant") == "" {
		return usageError("vnicctl dump needs --tenant NAME|ID (vnicctl tenants lists them)")
	}
	if path == "" {
		return usageError("vnicctl dump needs -w FILE.pcapng, or -w - for stdout")
	}
	req := proto.Dump{Version: proto.DumpVersion, Tenant: c.String("tenant"), Count: count, Snaplen: snaplen}
	if queue >= 0 {
		req.Queue = &queue
	}
	cl, err := connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	conn := cl.conn
	var rep proto.DumpReply
	if err := cl.callWith(proto.TDump, req, &rep); err != nil {
		return err
	}
	conn.Unix().SetDeadline(time.Time{})

	// The file is made only once vnicd accepted the dump.
	var out io.Writer
	var file *os.File
	if path == "-" {
		out = c.App.Writer
	} else {
		if file, err = os.Create(path); err != nil {
			conn.Send(proto.TDumpStop, nil)
			return fmt.Errorf("create %s: %w", path, err)
		}
		defer file.Close()
		out = file
	}
	bw := bufio.NewWriterSize(out, 256<<10)
	w, err := pcapng.NewWriter(bw, pcapng.Section{Application: buildinfo.Long("vnicctl") + " dump", OS: runtime.GOOS,
		Comment: fmt.Sprintf("frames vnicd delivered to tenant %q (id %d)", rep.Name, rep.Tenant)})
	if err != nil {
		return err
	}
	// One interface per captured queue.
	queues := []int{}
	if rep.Queue != nil {
		queues = append(queues, *rep.Queue)
	} else {
		for q := 0; q < rep.Queues; q++ {
			queues = append(queues, q)
		}
	}
	iface := map[int]int{}
	for _, q := range queues {
		id, err := w.AddInterface(pcapng.Interface{Name: fmt.Sprintf("%s/q%d", rep.Name, q), Snaplen: uint32(rep.Snaplen),
			Description: fmt.Sprintf("vnic tenant %q (id %d) queue %d: frames as delivered, after RSS steering", rep.Name, rep.Tenant, q)})
		if err != nil {
			return err
		}
		iface[q] = id
	}
	if err := bw.Flush(); err != nil {
		conn.Send(proto.TDumpStop, nil)
		return fmt.Errorf("write %s: %w", path, err)
	}
	errw := c.App.ErrWriter
	qdesc := "every queue"
	if rep.Queue != nil {
		qdesc = fmt.Sprintf("queue %d", *rep.Queue)
	}
	fmt.Fprintf(errw, "vnicctl: dumping tenant %q (id %d), %s of %d, snaplen %d, mirror ring of %d frames; Ctrl-C stops\n",
		rep.Name, rep.Tenant, qdesc, rep.Queues, rep.Snaplen, rep.Slots)

	// Ctrl-C (or SIGTERM) asks vnicd to stop; the stream then ends with
	// what the mirror still holds and a TDumpEnd.
	done := make(chan struct{})
	defer close(done)
	var stopping atomic.Bool
	go func() {
		select {
		case <-c.Context.Done():
			stopping.Store(true)
			conn.Unix().SetReadDeadline(time.Now().Add(dumpEndWait))
			conn.Send(proto.TDumpStop, nil)
		case <-done:
		}
	}()

	perQ := map[int]uint64{}
	var (
		written uint64
		end     proto.DumpEnd
		ended   bool
		dropped uint64
		werr    error
		serr    error
	)
	for !ended {
		typ, body, files, err := conn.Recv()
		for _, f := range files {
			f.Close()
		}
		if err != nil {
			serr = err
			break
		}
		if stopping.Load() { // progress: wait for the next message afresh
			conn.Unix().SetReadDeadline(time.Now().Add(dumpEndWait))
		}
		switch typ {
		case proto.TDumpFrames:
			var fr proto.DumpFrames
			if err := json.Unmarshal(body, &fr); err != nil {
				serr = fmt.Errorf("undecodable frames from vnicd: %w", err)
				break
			}
			dropped = fr.Dropped
			for _, f := range fr.Frames {
				id, ok := iface[f.Queue]
				if !ok || werr != nil || count > 0 && written >= count {
					continue
				}
				if werr = w.WritePacket(id, time.Unix(0, f.Time), f.Len, f.Data, ""); werr == nil {
					written++
					perQ[f.Queue]++
				}
			}
			if werr == nil {
				werr = bw.Flush() // readers of a pipe see frames as they come
			}
			if werr != nil {
				conn.Send(proto.TDumpStop, nil)
			}
		case proto.TDumpEnd:
			if err := json.Unmarshal(body, &end); err != nil {
				serr = fmt.Errorf("undecodable end of dump from vnicd: %w", err)
			}
			ended = true
		case proto.TError:
			var e proto.Error
			json.Unmarshal(body, &e)
			serr = fmt.Errorf("vnicd ended the dump: %s", e.Message)
		default:
			serr = fmt.Errorf("unexpected message type %d in the dump stream", typ)
		}
		if serr != nil {
			break
		}
	}
	if !ended {
		end.Dropped = dropped
	}
	// Interface statistics: per queue, frames captured plus those the
	// mirror could not take (ifrecv), and those (ifdrop).
	now := time.Now()
	for _, q := range queues {
		var qd uint64
		if q < len(end.QueueDropped) {
			qd = end.QueueDropped[q]
		}
		if werr == nil {
			werr = w.WriteStats(pcapng.Stats{Interface: iface[q], Time: now, Start: time.Unix(0, rep.Start), End: now,
				Received: perQ[q] + qd, Dropped: qd})
		}
	}
	if werr == nil {
		werr = bw.Flush()
	}
	if file != nil {
		if err := file.Close(); werr == nil && err != nil {
			werr = err
		}
	}
	sum := dumpSummary{Tenant: rep.Name, File: path, Frames: written, Dropped: end.Dropped, Mirrored: end.Mirrored, Reason: end.Reason}
	if !ended {
		sum.Reason = "the stream broke off"
	}
	if format == outJSON {
		jw := c.App.Writer
		if path == "-" {
			jw = errw
		}
		writeJSON(jw, sum)
	} else {
		where := path
		if path == "-" {
			where = "stdout"
		}
		fmt.Fprintf(errw, "vnicctl: %d frames written to %s; %d not captured (mirror ring full); ended: %s\n", written, where, sum.Dropped, sum.Reason)
	}
	switch {
	case werr != nil:
		return fmt.Errorf("write %s: %w", path, werr)
	case serr != nil:
		var ne net.Error
		if errors.As(serr, &ne) && ne.Timeout() {
			return fmt.Errorf("vnicd sent nothing for %v after the stop; the file holds what arrived", dumpEndWait)
		}
		if errors.Is(serr, proto.ErrClosed) || errors.Is(serr, io.EOF) || errors.Is(serr, syscall.ECONNRESET) {
			return &ctlError{code: exitNotRunning, err: serr,
				msg: fmt.Sprintf("vnicd closed the connection before the dump ended (it stopped?); %s holds the %d frames that arrived", path, written)}
		}
		return serr
	}
	return nil
}
