package counters

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Row is one line of a counter table: a label (tenant/ring) and a snapshot.
type Row struct {
	Label string
	Snap  Snapshot
	// Extra columns placed after the label (for example Ax fill).
	Extra []string
}

// RingColumns are the columns of the per-ring table that vnicctl rings and
// the demo print.
var RingColumns = []ID{Packets, Bytes, BxOccupancy, BxHighWater, BorrowsIn, BorrowsOut, Notices,
	AxDepletions, DropBxFull, DropAxStarved, DropBadBuffer, Malformed}

// WriteTable prints rows as an aligned table with the given columns. rate,
// if non-zero, divides counters (not gauges) by it to show per-second rates.
func WriteTable(w io.Writer, extraHeads []string, cols []ID, rows []Row, rate float64) error {
	return WriteTableHeads(w, extraHeads, cols, nil, rows, rate)
}

// WriteTableHeads is WriteTable with column heads other than the counters'
// names where heads has one (a narrow table's short forms).
func WriteTableHeads(w io.Writer, extraHeads []string, cols []ID, heads map[ID]string, rows []Row, rate float64) error {
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', tabwriter.AlignRight)
	hs := append([]string{"ring"}, extraHeads...)
	for _, c := range cols {
		h := c.String()
		if s, ok := heads[c]; ok {
			h = s
		}
		if rate > 0 && !c.Gauge() {
			h += "/s"
		}
		hs = append(hs, h)
	}
	fmt.Fprintln(tw, strings.Join(hs, "\t")+"\t")
	for _, r := range rows {
		cells := append([]string{r.Label}, r.Extra...)
		for _, c := range cols {
			v := float64(r.Snap[c])
			if rate > 0 && !c.Gauge() {
				v /= rate
			}
			cells = append(cells, human(v))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

func human(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v == float64(uint64(v)):
		return fmt.Sprintf("%d", uint64(v))
	}
	return fmt.Sprintf("%.1f", v)
}
