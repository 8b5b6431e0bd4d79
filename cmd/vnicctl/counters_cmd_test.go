package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/counters"
	"github.com/vnic/vnic/internal/proto"
)

func TestCountersJSON(t *testing.T) {
	r, st := trafficRig(t)
	out := mustRun(t, "--socket", r.socket, "counters", "-o", "json")
	var got proto.Stats
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("output does not decode into proto.Stats: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(got.Tenants, st.Tenants) || !reflect.DeepEqual(got.Global, st.Global) {
		t.Errorf("vnicctl counters -o json differs from the daemon's Stats:\n%+v\n%+v", got.Tenants, st.Tenants)
	}
	if got.History == nil || len(got.History) != 0 {
		t.Errorf("history should be an empty list, is %v", got.History)
	}
	// Every counter name is there, on both sides of every ring.
	for _, ring := range got.Tenants[0].Rings {
		for id := counters.ID(0); id < counters.NumIDs; id++ {
			if _, ok := ring.NIC[id.String()]; !ok {
				t.Errorf("ring %d lacks nic.%s", ring.Queue, id)
			}
			if _, ok := ring.Client[id.String()]; !ok {
				t.Errorf("ring %d lacks client.%s", ring.Queue, id)
			}
		}
	}
}

func TestCountersTable(t *testing.T) {
	r, st := trafficRig(t)
	// A detached tenant shows with its counters as they were.
	gone := r.attach(client.AttachOptions{Name: "gone", Match: client.Match{Proto: "tcp", DstPortLo: 9999, Dst: "198.20.0.0/16"}}, false)
	gone.Close()
	out := mustRun(t, "--socket", r.socket, "counters")
	t.Logf("vnicctl counters:\n%s", out)
	for _, want := range []string{
		"engine (frames that reached no tenant)\n",
		"\ntenant 1 \"app\" (attached ",
		"\ntenant 2 \"lazy\" (attached ",
		"\ntenant 3 \"gone\" (detached ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q", want)
		}
	}
	_, lazy, _ := strings.Cut(out, "tenant 2 \"lazy\"")
	lazy, _, _ = strings.Cut(lazy, "\ntenant 3")
	rows := map[string][]string{}
	for _, l := range strings.Split(lazy, "\n")[1:] {
		f := strings.Fields(l)
		if len(f) == 3 {
			rows[f[0]+"/"+f[1]] = f
		}
	}
	want := st.Tenants[1].Rings[0]
	for id := counters.ID(0); id < counters.NumIDs; id++ {
		side, m := "nic", want.NIC
		if isClientID(id) {
			side, m = "client", want.Client
		}
		row := rows[id.String()+"/"+side]
		if row == nil || row[2] != formatUint(m[id.String()]) {
			t.Errorf("lazy %s %s: row %q, daemon says %d", side, id, row, m[id.String()])
		}
	}
	if rows["drops_ax_starved/nic"][2] != "1936" {
		t.Errorf("lazy drops_ax_starved %v", rows["drops_ax_starved/nic"])
	}

	out = mustRun(t, "--socket", r.socket, "counters", "--nonzero")
	if strings.Contains(out, "drops_bx_full") || !strings.Contains(out, "drops_ax_starved") {
		t.Errorf("--nonzero:\n%s", out)
	}
}

func formatUint(v uint64) string { return strconv.FormatUint(v, 10) }

// TestCountersNoEmptyHeading: with --nonzero, a block with nothing to show
// (the engine's global counters when every frame reached a tenant, the
// source's statistics when all are zero) prints no heading either.
func TestCountersNoEmptyHeading(t *testing.T) {
	var b bytes.Buffer
	st := proto.Stats{Global: map[string]uint64{"drops_no_tenant": 0}, Source: map[string]uint64{"xsk_rx_frames": 5, "xsk_rx_dropped": 0}}
	if err := writeCounters(&b, st, true); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "engine (frames that reached no tenant)") || !strings.HasPrefix(out, "source (") ||
		!strings.Contains(out, "xsk_rx_frames") || strings.Contains(out, "xsk_rx_dropped") {
		t.Errorf("--nonzero output:\n%s", out)
	}
	b.Reset()
	st.Source = map[string]uint64{"xsk_rx_dropped": 0}
	writeCounters(&b, st, true)
	if strings.Contains(b.String(), "source (") {
		t.Errorf("source heading with nothing under it:\n%s", b.String())
	}
	b.Reset()
	st.Global["drops_no_tenant"] = 7
	writeCounters(&b, st, true)
	if !strings.HasPrefix(b.String(), "engine (frames that reached no tenant)\n") || !strings.Contains(b.String(), "drops_no_tenant") {
		t.Errorf("engine block lost:\n%s", b.String())
	}
}
