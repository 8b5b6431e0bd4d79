package testutil

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// SmapsField returns a field of /proc/self/smaps (such as "AnonHugePages"
// or "ShmemPmdMapped"), in bytes, for the mapping that contains addr.
func SmapsField(addr uintptr, field string) (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	in := false
	for s.Scan() {
		l := s.Text()
		if k := strings.IndexByte(l, ' '); k > 0 && strings.Contains(l[:k], "-") && !strings.HasSuffix(l[:k], ":") {
			lo, hi, _ := strings.Cut(l[:k], "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= a && uint64(addr) < b
			continue
		}
		if !in || !strings.HasPrefix(l, field+":") {
			continue
		}
		fs := strings.Fields(l[len(field)+1:])
		if len(fs) != 2 || fs[1] != "kB" {
			return 0, fmt.Errorf("smaps: %q: unexpected format", l)
		}
		kb, err := strconv.ParseInt(fs[0], 10, 64)
		return kb << 10, err
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("smaps: no mapping holds %#x with a %s field", addr, field)
}
