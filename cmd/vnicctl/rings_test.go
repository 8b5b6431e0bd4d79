package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vnic/vnic/internal/proto"
)

// table parses an aligned table into rows keyed by their first cell, each
// a map from column head to cell.
func table(t *testing.T, out string) map[string]map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	heads := strings.Fields(lines[0])
	rows := map[string]map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != len(heads) {
			break // the table ended
		}
		row := map[string]string{}
		for i, h := range heads {
			row[h] = f[i]
		}
		rows[f[0]] = row
	}
	return rows
}

func TestRings(t *testing.T) {
	r, st := trafficRig(t)
	out := mustRun(t, "--socket", r.socket, "rings", "-o", "wide")
	t.Logf("vnicctl rings:\n%s", out)
	rows := table(t, out)
	if len(rows) != 4 {
		t.Fatalf("want rows app/0, app/1, app/all, lazy/0; got %d:\n%s", len(rows), out)
	}
	// Every cell that the table prints exactly (below 10k) matches the
	// daemon's own counters.
	for _, ten := range st.Tenants {
		for _, ring := range ten.Rings {
			label := ten.Name + "/" + strconv.Itoa(ring.Queue)
			row, ok := rows[label]
			if !ok {
				t.Fatalf("no row %s", label)
			}
			if row["ax_fill"] != strconv.Itoa(ring.AxFill) {
				t.Errorf("%s ax_fill %s, daemon says %d", label, row["ax_fill"], ring.AxFill)
			}
			for side, m := range map[string]map[string]uint64{"nic": ring.NIC, "client": ring.Client} {
				for _, col := range ringColumns {
					if isClientID(col) != (side == "client") || m[col.String()] >= 1e4 {
						continue
					}
					if got, want := row[col.String()], strconv.FormatUint(m[col.String()], 10); got != want {
						t.Errorf("%s %s: table says %s, daemon %s", label, col, got, want)
					}
				}
			}
		}
	}
	// Every one of app's 4000 frames was delivered (and received by the
	// app) or dropped for a counted reason: a slow machine makes its
	// consumers fall behind, and it borrows, then starves. Lazy kept its 64
	// buffers and every other frame of its 2000 was dropped as starvation.
	app, lazy := rows["app/all"], rows["lazy/0"]
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	if n(app["packets"])+n(app["drops_ax_starved"])+n(app["drops_bx_full"]) != 4000 || app["received"] != app["packets"] {
		t.Errorf("app/all %v", app)
	}
	if n(app["borrows_in"]) != n(app["borrows_out"]) {
		t.Errorf("app borrowed %s buffers and lent %s", app["borrows_in"], app["borrows_out"])
	}
	if lazy["packets"] != "64" || lazy["drops_ax_starved"] != "1936" || lazy["received"] != "0" || lazy["ax_fill"] != "0" {
		t.Errorf("lazy/0 %v", lazy)
	}

	// --tenant by name and by ID; the legend explains the columns.
	out = mustRun(t, "--socket", r.socket, "rings", "--tenant", "lazy", "--legend", "-o", "wide")
	if rows := table(t, out); len(rows) != 1 || rows["lazy/0"] == nil {
		t.Errorf("--tenant lazy:\n%s", out)
	}
	if !regexp.MustCompile(`\ndrops_ax_starved +Frames\s+dropped\s+because\s+no\s+Ax\s+ring\s+in\s+the\s+association\s+set\s+had\s+a\s+buffer\s+\(allocation\s+starvation\)\.\n`).MatchString(out) {
		t.Errorf("legend:\n%s", out)
	}
	if rows := table(t, mustRun(t, "--socket", r.socket, "rings", "-t", "1")); len(rows) != 3 || rows["app/all"] == nil {
		t.Errorf("--tenant 1: %v", rows)
	}
	if _, _, err := run(t, "--socket", r.socket, "rings", "--tenant", "nobody"); err == nil || !strings.Contains(err.Error(), "vnicctl tenants") {
		t.Errorf("--tenant nobody: %v", err)
	}
	// rings and watch agree: a tenant that does not exist is "not found"
	// (5); a wrong command or flag is a usage error (2), never the "not
	// running" status (3).
	for _, args := range [][]string{{"rings", "--tenant", "nobody"}, {"watch", "--tenant", "nobody", "--count", "1"}} {
		_, _, err := run(t, append([]string{"--socket", r.socket}, args...)...)
		if ce, ok := err.(*ctlError); !ok || ce.ExitCode() != exitNotFound {
			t.Errorf("%v: %v, want exit status %d", args, err, exitNotFound)
		}
	}
	for _, args := range [][]string{{"bogus"}, {"rings", "--nope"}, {"rings", "-o", "yaml"}, {"watch", "--interval", "1ms"}, {"testbed", "frobnicate"}} {
		_, _, err := run(t, append([]string{"--socket", r.socket}, args...)...)
		if ce, ok := err.(*ctlError); !ok || ce.ExitCode() != exitUsage {
			t.Errorf("%v: %v, want exit status %d", args, err, exitUsage)
		}
	}
	var ts []proto.TenantStats
	if err := json.Unmarshal([]byte(mustRun(t, "--socket", r.socket, "rings", "-o", "json", "-t", "app")), &ts); err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || len(ts[0].Rings) != 2 || ts[0].Rings[1].NIC["packets"] != st.Tenants[0].Rings[1].NIC["packets"] {
		t.Errorf("JSON %+v", ts)
	}
}
