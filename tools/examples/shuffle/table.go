package main

import (
	"encoding/binary"
	"math/bits"

	"github.com/vnic/vnic/internal/splitmix"
)

// Columns and TupleLen: the table has 16 columns of 8 bytes; a row
// (tuple) is 128 bytes.
const (
	Columns  = 16
	TupleLen = Columns * 8
)

// Table is an in-memory columnar table: Cols[c][r] is column c of row r.
type Table struct {
	Cols [Columns][]uint64
}

// Rows returns the number of rows.
func (t *Table) Rows() int { return len(t.Cols[0]) }

// GenTable makes host's table of rows rows, deterministic in (host, seed):
// every value is a splitmix64 of its host, row and column, so no two rows
// of the cluster are equal and the partitioning column is uniform.
func GenTable(host, rows int, seed uint64) *Table {
	t := &Table{}
	for c := range t.Cols {
		col := make([]uint64, rows)
		base := seed ^ uint64(host)<<48 ^ uint64(c)<<40
		for r := range col {
			col[r] = splitmix.Mix(base + uint64(r))
		}
		t.Cols[c] = col
	}
	return t
}

// putTuple writes row r of t into dst (TupleLen bytes) in row format: the
// scatter from columns to rows the sender does.
func (t *Table) putTuple(dst []byte, r int) {
	_ = dst[TupleLen-1]
	for c := range t.Cols {
		binary.LittleEndian.PutUint64(dst[8*c:], t.Cols[c][r])
	}
}

// rowSum is a row's contribution to a checksum: order does not matter
// (checksums add), the position of each value does.
func rowSum(tuple []byte) uint64 {
	_ = tuple[TupleLen-1]
	var h uint64
	for c := range Columns {
		h = bits.RotateLeft64(h, 7) ^ splitmix.Mix(binary.LittleEndian.Uint64(tuple[8*c:])+uint64(c))
	}
	return h
}

// Tally counts rows and sums their checksums.
type Tally struct {
	Rows uint64
	Sum  uint64
}

func (a *Tally) add(tuple []byte) { a.Rows++; a.Sum += rowSum(tuple) }

// Merge adds b to a.
func (a *Tally) Merge(b Tally) { a.Rows += b.Rows; a.Sum += b.Sum }
