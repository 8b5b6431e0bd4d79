package main

import (
	"fmt"
	"strings"

	"github.com/vnic/vnic/internal/proto"
)

// ledgerDrops are the fabric ledger's drop reasons (nic/fabric's Reason
// names) in vnicctl fabric's column order.
var ledgerDrops = []string{"spoofed", "no_host", "flow_limit", "dpu_limit", "nic_cap", "loss", "delay_full"}

// printLedger prints the fabric's ledger of nodes ids, this process's
// hosts, as vnicctl fabric reads it (TStatus and TStats on the control
// socket). It runs while the hosts are attached; a failure to read it is
// reported in the output, not returned: the round trips already ran.
func printLedger(o options, ids ...int) {
	status, hosts, err := fabricLedger(o.socket)
	if err != nil {
		fmt.Fprintf(o.out, "fabric ledger: %v\n", err)
		return
	}
	model := status.Mode
	if model == "" {
		model = "fabric"
	}
	fmt.Fprintf(o.out, "fabric ledger of vnicd at %s (%s):\n", o.socket, model)
	for _, id := range ids {
		t, ok := hosts[tenantName(id)]
		if !ok {
			fmt.Fprintf(o.out, "  node %d: not attached to vnicd at %s\n", id, o.socket)
			continue
		}
		fmt.Fprintf(o.out, "  %s (node %d): %s\n", t.Host.Addr, id, ledgerLine(t.Ledger))
	}
	fmt.Fprintf(o.out, "every host, and detached ones: vnicctl fabric --all --socket %s\n", o.socket)
}

// ledgerLine is one host's ledger: sent, delivered, received, then the
// drops that are not zero.
func ledgerLine(l map[string]uint64) string {
	s := fmt.Sprintf("sent %d, delivered %d, received %d", l["sent"], l["delivered"], l["received"])
	var drops []string
	for _, k := range ledgerDrops {
		if v := l[k]; v != 0 {
			drops = append(drops, fmt.Sprintf("%s %d", k, v))
		}
	}
	if len(drops) == 0 {
		return s + ", no drops"
	}
	return s + ", dropped " + strings.Join(drops, ", ")
}

// fabricLedger returns vnicd's status and its attached hosts by tenant
// name.
func fabricLedger(socket string) (proto.Status, map[string]proto.TenantStats, error) {
	var status proto.Status
	var st proto.Stats
	c, err := proto.Dial(socket)
	if err != nil {
		return status, nil, err
	}
	defer c.Close()
	if _, err := c.Call(proto.TStatus, nil, &status); err != nil {
		return status, nil, fmt.Errorf("vnicd status: %w", err)
	}
	if _, err := c.Call(proto.TStats, nil, &st); err != nil {
		return status, nil, fmt.Errorf("vnicd stats: %w", err)
	}
	hosts := make(map[string]proto.TenantStats)
	for _, t := range st.Tenants {
		if t.Ledger != nil && t.Host != nil {
			hosts[t.Name] = t
		}
	}
	return status, hosts, nil
}
