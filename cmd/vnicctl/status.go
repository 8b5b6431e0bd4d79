package main

import (
	"fmt"
	"io"
	"text/tabwriter"

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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
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
			metrics += fmt.Sprintf("\n\tinside vnicd's network namespace %s, not this one: ip netns exec %s curl ...", ns, ns)
		}
	}
	for _, kv := range [][2]string{
		{"vnicd", fmt.Sprintf("running, version %s, pid %d, up %s", dash(st.Version), st.PID, dash(st.Uptime))},
		{"model", dash(st.Model)},
		{"policy", dash(st.Policy) + policyNote(st.Policy)},
		{"source", source},
		{"tenants", fmt.Sprintf("%d attached", st.Tenants)},
		{"emulator", cpu},
		{"idle", idleNote(st)},
		{"socket", dash(st.Socket)},
		{"metrics", metrics},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	if st.Dumps > 0 || st.DumpDrops > 0 { // vnicctl dump
		fmt.Fprintf(tw, "dumps:\t%d running; %d frames not captured since start (mirror ring full)\n", st.Dumps, st.DumpDrops)
	}
	return tw.Flush()
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
