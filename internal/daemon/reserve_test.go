package daemon

import (
	"testing"
)

// TestClassify: root is root whatever its groups; a peer whose effective
// gid or a supplementary group is the admin group is a member; vnicd's
// own uid, the socket's group or any other group earn nothing.
func TestClassify(t *testing.T) {
	admin := uint32(4242)
	for _, c := range []struct {
		uid, gid uint32
		groups   []uint32
		admin    *uint32
		want     connClass
	}{
		{0, 0, nil, nil, classRoot},
		{0, 100, []uint32{4242}, &admin, classRoot},
		{1000, 4242, nil, &admin, classAdmin},
		{1000, 1000, []uint32{27, 4242}, &admin, classAdmin},
		{1000, 1000, []uint32{27, 4243}, &admin, classOrdinary},
		{1000, 4242, []uint32{4242}, nil, classOrdinary}, // no --admin-group
		{65534, 65534, nil, &admin, classOrdinary},
	} {
		if got := classify(c.uid, c.gid, c.groups, c.admin); got != c.want {
			t.Errorf("uid %d gid %d groups %v admin %v: %v, want %v", c.uid, c.gid, c.groups, c.admin, got, c.want)
		}
	}
	zero := uint32(0)
	if got := classify(1000, 0, nil, &zero); got != classAdmin {
		t.Errorf("--admin-group 0 and a peer of gid 0: %v", got)
	}
}

// TestIdlest: the reserve gives up the connection that has gone longest
// without a request, the earliest admitted of equals, and nothing when
// empty.
func TestIdlest(t *testing.T) {
	mk := func(seq uint64, last int64) *connState {
		s := &connState{seq: seq}
		s.last.Store(last)
		return s
	}
	set := map[string]*connState{"a": mk(1, 300), "b": mk(2, 100), "c": mk(3, 200)}
	if got := idlest(set); got != "b" {
		t.Fatalf("idlest %q, want b (idle since 100)", got)
	}
	set["b"].last.Store(400)
	if got := idlest(set); got != "c" {
		t.Fatalf("after b sent a request: idlest %q, want c", got)
	}
	set = map[string]*connState{"x": mk(7, 50), "y": mk(5, 50), "z": mk(6, 50)}
	if got := idlest(set); got != "y" {
		t.Fatalf("equals: idlest %q, want y (admitted first)", got)
	}
	if got := idlest(map[string]*connState{}); got != "" {
		t.Fatalf("empty: %q", got)
	}
}
