package casestudy

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CSVRow is one line of a CSV file that a case study's -csv wrote, read by
// the names of the file's header.
type CSVRow struct {
	col    map[string]int
	fields []string
}

// Get is the field of column name ("" if the file has no such column).
func (r CSVRow) Get(name string) string {
	if j, ok := r.col[name]; ok {
		return r.fields[j]
	}
	return ""
}

// Num is the field of column name as a number (0 if the file has no such
// column or the field is no number).
func (r CSVRow) Num(name string) float64 {
	v, _ := strconv.ParseFloat(r.Get(name), 64)
	return v
}

// ReadCSV reads the lines of a CSV file that command cmd's -csv wrote, to
// redraw a plot; the header must name the columns need (older files may
// lack the others).
func ReadCSV(cmd, path string, need ...string) ([]CSVRow, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	col := map[string]int{}
	for i, name := range strings.Split(lines[0], ",") {
		col[name] = i
	}
	for _, n := range need {
		if _, ok := col[n]; !ok {
			return nil, fmt.Errorf("%s: %s has no %s column: give a CSV that -csv wrote", cmd, path, n)
		}
	}
	var rows []CSVRow
	for i, line := range lines[1:] {
		f := strings.Split(line, ",")
		if len(f) != len(col) {
			return nil, fmt.Errorf("%s: %s line %d: %d fields, the header has %d", cmd, path, i+2, len(f), len(col))
		}
		rows = append(rows, CSVRow{col: col, fields: f})
	}
	return rows, nil
}
