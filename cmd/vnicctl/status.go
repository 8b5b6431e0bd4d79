package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/vnic/vnic/internal/proto"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show whether vnicd runs, and how: version, uptime, model, policy, frame source, tenants",
		UsageText: "vnicctl status\nvnicctl --socket /tmp/vnicd.sock status -o json",
		Flags:     []cli.Flag{socketFlag(), outputFlag()},
		Action: func(c *cli.Context) error {
			format, err := outputFormat(c)
			if err != nil {
				return err
			}
			var st proto.Status
			if err := request(c, proto.TStatus, &st); err != nil {
				return err
			}
			if format == outJSON {
				return writeJSON(c.App.Writer, st)
			}
			return writeStatus(c.App.Writer, st, netnsOf(st.PID))
		},
	}
}

// writeStatus prints the status; ns, when not "", names the network
// namespace vnicd runs in (not vnicctl's), where its metrics address is.
func writeStatus(w io.Writer, st proto.Status, ns string) error {
	source := dash(st.Source)
	if st.Mode != "" {
		source += " (" + st.Mode + ")"
	}
	cpu := "unpinned"
	if st.Emulator >= 0 {
		cpu = fmt.Sprintf("CPU %d", st.Emulator)
	}
	if st.EmulatorPriority == "idle" {
		cpu += ", SCHED_IDLE (yields at once to any other task on its CPU)"
	}
	metrics := "off (enable with vnicd run --metrics-addr 127.0.0.1:9464)"
	if st.Metrics != "" {
		metrics = "http://" + st.Metrics + "/metrics"
		if ns != "" {
			metrics += fmt.Sprintf("\ninside vnicd's network namespace %s, not this one: ip netns exec %s curl ...", ns, ns)
		}
	}
	kvs := [][2]string{
		{"vnicd", fmt.Sprintf("running, version %s, pid %d, up %s", dash(st.Version), st.PID, dash(st.Uptime))},
		{"model", dash(st.Model)},
		{"policy", dash(st.Policy) + policyNote(st.Policy)},
		{"source", source},
		{"tenants", fmt.Sprintf("%d attached", st.Tenants)},
		{"emulator", cpu},
		{"idle", idleNote(st)},
		{"socket", dash(st.Socket)},
		{"metrics", metrics},
	}
	if st.Dumps > 0 || st.DumpDrops > 0 { // vnicctl dump
		kvs = append(kvs, [2]string{"dumps", fmt.Sprintf("%d running; %d frames not captured since start (mirror ring full)", st.Dumps, st.DumpDrops)})
	}
	keyw := 0
	for _, kv := range kvs {
		keyw = max(keyw, len(kv[0])+1)
	}
	keyw += 2
	var b strings.Builder
	for _, kv := range kvs {
		for i, line := range wrapText(kv[1], termWidth-keyw) {
			key := ""
			if i == 0 {
				key = kv[0] + ":"
			}
			fmt.Fprintf(&b, "%-*s%s\n", keyw, key, line)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// termWidth is the width vnicctl's default output keeps within.
const termWidth = 80

// wrapText splits s into lines of at most width characters at spaces
// (a word longer than width stands alone); a newline in s starts a new
// line.
func wrapText(s string, width int) []string {
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			switch {
			case line == "":
				line = word
			case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= width:
				line += " " + word
			default:
				out = append(out, line)
				line = word
			}
		}
		out = append(out, line)
	}
	return out
}

// policyNote says what the starvation policy does.
func policyNote(p string) string {
	switch p {
	case "drop":
		return " (a frame with no free buffer is dropped and counted as drops_ax_starved)"
	case "pause":
		return " (with no free buffer vnicd stops pulling from the wire; counted as paused_batches)"
	}
	return ""
}

// idleNote says what the engine does without work.
func idleNote(st proto.Status) string {
	switch st.Idle {
	case "adaptive":
		if st.RxCoalesceMax != "" {
			return fmt.Sprintf("adaptive, rx-coalesce adaptive %s..%s, now %s (naps: %d; napping queues woken early: %d; sleeps when the wire pauses: %d)",
				st.RxCoalesce, st.RxCoalesceMax, dash(st.Nap), st.Naps, st.Urgent, st.Sleeps)
		}
		if st.RxCoalesce != "" && st.RxCoalesce != "0s" {
			return fmt.Sprintf("adaptive, rx-coalesce %s (naps when under-loaded: %d; sleeps after %s idle: %d)",
				st.RxCoalesce, st.Naps, dash(st.SpinBudget), st.Sleeps)
		}
		return fmt.Sprintf("adaptive (polls, sleeps in epoll after %s idle; slept %d times)", dash(st.SpinBudget), st.Sleeps)
	case "busy":
		return "busy (polls forever: one core at 100%, lowest latency)"
	}
	return dash(st.Idle)
}
