package main

import "testing"

// Figure 18 is taken at the offered rate whose median answered rate is
// nearest half of kernel TCP's most, as the median over the runs of each
// transport's p99 − minimum; killed-replica rows do not count.
func TestSpreadsAtHalfTCP(t *testing.T) {
	row := func(tr string, off, got, min, p99 float64) Row {
		return Row{Transport: tr, Offered: off, Throughput: got, Service: Lat{Count: 10, Min: min, P99: p99}}
	}
	rows := []Row{
		row("tcp", 10000, 10000, 50, 150), row("tcp", 10000, 10000, 50, 250), row("tcp", 10000, 9000, 50, 350),
		row("tcp", 20000, 19000, 60, 1000), row("tcp", 20000, 20000, 60, 900), row("tcp", 20000, 18000, 60, 800),
		row("tcp", 40000, 20000, 70, 5000), // saturated: its answered rate counts toward the most
		row("hot", 10000, 10000, 20, 29), row("hot", 10000, 10000, 20, 30), row("hot", 10000, 10000, 20, 90),
		row("hot", 20000, 20000, 20, 40),
	}
	k := row("hot", 10000, 10000, 0, 99999)
	k.Killed = true
	rows = append(rows, k)
	rate, most := HalfTCPRate(rows)
	if most != 20000 || rate != 10000 {
		t.Fatalf("half-TCP rate %v of most %v, want 10000 of 20000", rate, most)
	}
	sp, _ := Spreads(rows)
	if len(sp) != 2 || sp[0].Transport != "hot" || sp[0].P99MinUs != 10 || sp[0].Runs != 3 || sp[1].Transport != "tcp" || sp[1].P99MinUs != 200 {
		t.Fatalf("spreads %+v, want hot 10 µs over 3 runs, tcp 200 µs", sp)
	}
}
