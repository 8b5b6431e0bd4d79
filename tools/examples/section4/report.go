package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/plot/vg"

	"github.com/vnic/vnic/nic/fabric"
	"github.com/vnic/vnic/tools/internal/figure"
)

// runNote is the run's scale, placement, time and load, a comment line of
// every CSV.
var runNote string

func ff(v float64, p int) string { return strconv.FormatFloat(v, 'f', p, 64) }
func fu(v uint64) string         { return strconv.FormatUint(v, 10) }

// writeCSV writes rows under header to stem.csv, after comment lines
// (# ...) that record the model and the placement.
func writeCSV(stem string, comments []string, header []string, rows [][]string) error {
	var b bytes.Buffer
	if runNote != "" {
		comments = append(comments, runNote)
	}
	for _, c := range comments {
		fmt.Fprintf(&b, "# %s\n", c)
	}
	w := csv.NewWriter(&b)
	w.Write(header)
	w.WriteAll(rows)
	if err := w.Error(); err != nil {
		return err
	}
	return os.WriteFile(stem+".csv", b.Bytes(), 0o644)
}

// ledgerCols are the ledger columns every CSV ends with.
var ledgerCols = []string{"fabric_sent", "fabric_delivered", "drop_flow_limit", "drop_dpu_limit", "drop_nic_cap", "drop_other", "rx_engine_drops", "balanced"}

func ledgerRow(l ledger) []string {
	other := l.dropped() - l.Drops["flow_limit"] - l.Drops["dpu_limit"] - l.Drops["nic_cap"]
	return []string{fu(l.Sent), fu(l.Delivered), fu(l.Drops["flow_limit"]), fu(l.Drops["dpu_limit"]), fu(l.Drops["nic_cap"]), fu(other), fu(l.RxDrops), strconv.FormatBool(l.balanced())}
}

// profileNote says how the run's limit compares with the paper's and with
// the aws-c7gn profile's.
func profileNote(what string, ours, paper, profile float64) string {
	p, _ := fabric.LookupProfile("aws-c7gn")
	return fmt.Sprintf("%s: %.4g here, %.4g in the paper (scale %.4g); the aws-c7gn profile scales by %.2f (%.4g), this run by a further %.4g for this machine",
		what, ours, paper, ours/paper, p.Scale, profile, ours/profile)
}

func writeFig8(stem string, c fig8Config, model []string, rows []fig8Row) error {
	p, _ := fabric.LookupProfile("aws-c7gn")
	flowG := gbps(c.FlowPps, c.Payload)
	comments := []string{
		"Figure 8: port scaling under the flow limit; vnicd run --source fabric " + strings.Join(model, " "),
		fmt.Sprintf("%d-byte datagrams (%d-byte frames); flow limit %.0f frames/s, NIC cap %.0f flows' worth; each pair offers %.2gx its limit", c.Payload, frameLen(c.Payload), c.FlowPps, c.NICFlows, c.Offer),
		profileNote("flow limit Gbit/s", flowG, 8, p.Config.FlowBps/1e9),
	}
	var out [][]string
	var xs, rx, model8, flowX, flowLine, nic []float64
	for _, r := range rows {
		out = append(out, append([]string{strconv.Itoa(r.Pairs), ff(r.Offered, 0), ff(float64(r.Sent)/r.SendSecs, 0), strconv.FormatBool(r.full()), ff(r.MaxGap.Seconds()*1e3, 1), ff(r.EngineGap.Seconds()*1e3, 1), ff(r.RxPps, 0), ff(r.RxGbps, 4), ff(r.LedgerPps, 0), ff(r.Expected, 0), ff(gbps(r.Expected, c.Payload), 4)}, ledgerRow(r.Ledger)...))
		xs = append(xs, float64(r.Pairs))
		rx = append(rx, r.RxGbps)
		model8 = append(model8, gbps(r.Expected, c.Payload))
		nic = append(nic, flowG*c.NICFlows)
		if float64(r.Pairs)*flowG <= 1.5*flowG*c.NICFlows { // past that it only squeezes the plot
			flowX, flowLine = append(flowX, float64(r.Pairs)), append(flowLine, float64(r.Pairs)*flowG)
		}
	}
	if err := writeCSV(stem, comments, append([]string{"pairs", "offered_fps", "sent_fps", "full", "sender_max_gap_ms", "engine_max_gap_ms", "rx_fps", "rx_gbps", "ledger_delivered_fps", "model_fps", "model_gbps"}, ledgerCols...), out); err != nil {
		return err
	}
	return figure.SavePanels(stem, 16*vg.Centimeter, 11*vg.Centimeter, 1, figure.Panel{
		Title:  fmt.Sprintf("Figure 8 on the fabric: %d-byte datagrams, flow limit %.3g Gbit/s, NIC %.3g Gbit/s", c.Payload, flowG, flowG*c.NICFlows),
		XLabel: "UDP port pairs (log)", YLabel: "Gbit/s at the receiver", LogX: true, ZeroY: true, XTicks: xs, LegendTop: true, LegendLeft: true, YHeadroom: 1.25,
		Series: []figure.Series{{Label: "measured at the receiver", X: xs, Y: rx}, {Label: "pairs x flow limit", X: flowX, Y: flowLine}, {Label: "NIC cap", X: xs, Y: nic}, {Label: "model: min of the two", X: xs, Y: model8}},
	})
}

func writeFig9a(stem string, c fig9aConfig, model []string, rows []fig9aRow) error {
	p, _ := fabric.LookupProfile("aws-c7gn")
	comments := []string{
		"Figure 9(a): sender scaling; vnicd run --source fabric " + strings.Join(model, " "),
		fmt.Sprintf("%d-byte frames; %d DPUs at %.0f frames/s each, flows hashed onto them by 5-tuple; each thread (or flow) offers %.2gx one DPU's rate", frameLen(c.Payload), c.DPUs, c.DPUPps, c.Offer),
		profileNote("DPU rate Mpps", c.DPUPps/1e6, 2.4, p.Config.DPUPps/1e6),
	}
	var out [][]string
	var tx, ty, fx, fy, dx, dy []float64
	for _, r := range rows {
		out = append(out, append([]string{r.Series, strconv.Itoa(r.N), ff(r.Offered, 0), ff(float64(r.Sent)/r.SendSecs, 0), strconv.FormatBool(r.full()), ff(r.MaxGap.Seconds()*1e3, 1), ff(r.EngineGap.Seconds()*1e3, 1), ff(r.RxPps, 0), ff(r.LedgerPps, 0), ff(r.RxPps/c.DPUPps, 2)}, ledgerRow(r.Ledger)...))
		if r.Series == "threads" {
			tx, ty = append(tx, float64(r.N)), append(ty, r.RxPps/1e3)
		} else {
			fx, fy = append(fx, float64(r.N)), append(fy, r.RxPps/1e3)
			dx, dy = append(dx, float64(r.N)), append(dy, c.DPUPps/1e3)
		}
	}
	if err := writeCSV(stem, comments, append([]string{"series", "n", "offered_fps", "sent_fps", "full", "sender_max_gap_ms", "engine_max_gap_ms", "rx_fps", "ledger_delivered_fps", "dpus_worth"}, ledgerCols...), out); err != nil {
		return err
	}
	return figure.SavePanels(stem, 16*vg.Centimeter, 11*vg.Centimeter, 1, figure.Panel{
		Title:  fmt.Sprintf("Figure 9(a) on the fabric: %d DPUs at %.3g kpps, %d-byte frames", c.DPUs, c.DPUPps/1e3, frameLen(c.Payload)),
		XLabel: "sender threads (one flow) or flows (log)", YLabel: "kfps at the receiver", LogX: true, ZeroY: true, LegendTop: true, LegendLeft: true, YHeadroom: 1.25,
		XTicks: fx,
		Series: []figure.Series{{Label: "one flow, N sender threads", X: tx, Y: ty}, {Label: "N flows", X: fx, Y: fy}, {Label: "one DPU's rate", X: dx, Y: dy}},
	})
}

func writeFig9b(stem string, c fig9bConfig, model []string, rows []fig9bRow) error {
	comments := []string{
		"Figure 9(b): receiver scaling; vnicd run --source fabric " + strings.Join(model, " ") + " (no limits: the bound is the receiver's)",
		fmt.Sprintf("receiver with %d queues, each processing at most %.0f frames/s (one core's rate, emulated by pacing the queue's consumer); %d flows of %d-byte frames offered at %.2gx the serving queues' rate", c.Queues, c.QueuePps, c.Flows, frameLen(c.Payload), c.Offer),
		"one-queue: every flow's ports picked (rss.PortPicker) to hash to queue 0; targeted: the flows' ports picked to land evenly on the serving queues",
	}
	var out [][]string
	ser := map[string]*figure.Series{"one-queue": {Label: "every flow hashes to one queue"}, "targeted": {Label: "queue-targeted ports (PortPicker)"}}
	ideal := &figure.Series{Label: "queues x one queue's rate"}
	for _, r := range rows {
		per := make([]string, len(r.PerQueuePps))
		for i, v := range r.PerQueuePps {
			per[i] = ff(v, 0)
		}
		out = append(out, append([]string{r.Series, strconv.Itoa(r.Serving), ff(r.Offered, 0), ff(float64(r.Sent)/r.SendSecs, 0), strconv.FormatBool(r.full()), ff(r.MaxGap.Seconds()*1e3, 1), ff(r.EngineGap.Seconds()*1e3, 1), ff(r.RxPps, 0), ff(r.LedgerPps, 0), ff(r.RxPps/c.QueuePps, 2), strings.Join(per, " ")}, ledgerRow(r.Ledger)...))
		s := ser[r.Series]
		s.X, s.Y = append(s.X, float64(r.Serving)), append(s.Y, r.RxPps/1e3)
		if r.Series == "targeted" {
			ideal.X, ideal.Y = append(ideal.X, float64(r.Serving)), append(ideal.Y, float64(r.Serving)*c.QueuePps/1e3)
		}
	}
	if err := writeCSV(stem, comments, append([]string{"series", "serving_queues", "offered_fps", "sent_fps", "full", "sender_max_gap_ms", "engine_max_gap_ms", "rx_fps", "ledger_delivered_fps", "queues_worth", "per_queue_fps"}, ledgerCols...), out); err != nil {
		return err
	}
	return figure.SavePanels(stem, 16*vg.Centimeter, 11*vg.Centimeter, 1, figure.Panel{
		Title:  fmt.Sprintf("Figure 9(b) on the fabric: %d-queue receiver, %.3g kfps per queue", c.Queues, c.QueuePps/1e3),
		XLabel: "receiver queues (cores) serving", YLabel: "kfps processed", ZeroY: true, LegendTop: true, LegendLeft: true, YHeadroom: 1.25,
		Series: []figure.Series{*ser["one-queue"], *ser["targeted"], *ideal},
	})
}

func writeFig10a(stem string, c fig10aConfig, model []string, rows []fig10aRow) error {
	comments := []string{
		"Figure 10(a): loss under load; vnicd run --source fabric " + strings.Join(model, " ") + " (no limits, no loss: every loss is the receiver's)",
		fmt.Sprintf("one flow of %d-byte messages offered at %.2gx the receiver's %.0f messages/s; queue buffers are the receiver queue's Ax ring; with flow control the receiver returns credits over the fabric and at most %d messages are in flight", c.Payload, c.Load, c.RecvPps, c.Window),
		"bi-channel: two more hosts, the library's credits (BuffersPerFlow) returned over its TCP control path as the application takes messages; lost = the fabric's and the receiver's rings' drops, resent = messages the library resent",
		"t_s rows are samples (lost so far: a gap in the sequence numbers; for the bi-channel the drops so far); final rows are after the sender stopped and the receiver drained",
	}
	var out [][]string
	var series []figure.Series
	for _, r := range rows {
		s := figure.Series{Label: r.Series}
		for _, sm := range r.Samples {
			out = append(out, []string{r.Series, strconv.Itoa(r.Buffers), strconv.Itoa(r.Window), ff(sm.T, 3), fu(sm.Sent), fu(sm.Received), fu(sm.Lost), "", "", "", "", "", "", "", "", "", ""})
			s.X, s.Y = append(s.X, sm.T), append(s.Y, float64(sm.Lost))
		}
		out = append(out, append([]string{r.Series, strconv.Itoa(r.Buffers), strconv.Itoa(r.Window), "final", fu(r.Sent), fu(r.Received), fu(r.Lost), fu(r.Resent)}, ledgerRow(r.Ledger)...))
		series = append(series, s)
	}
	if err := writeCSV(stem, comments, append([]string{"series", "buffers", "window", "t_s", "sent", "received", "lost", "resent"}, ledgerCols...), out); err != nil {
		return err
	}
	return figure.SavePanels(stem, 16*vg.Centimeter, 11*vg.Centimeter, 1, figure.Panel{
		Title:  fmt.Sprintf("Figure 10(a) on the fabric: offered %.2gx the receiver's %.3g kmsg/s", c.Load, c.RecvPps/1e3),
		XLabel: "time (s)", YLabel: "messages lost (cumulative)", ZeroY: true, LegendTop: true, LegendLeft: true, YHeadroom: 1.5,
		Series: series,
	})
}
