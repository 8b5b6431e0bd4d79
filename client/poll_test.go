package client

import (
	"testing"
	"time"
)

// TestNextPollBacksOffWhileIdle: the safety-net bound of an idle queue's
// sleep grows after each empty timeout up to waitPollIdle, and falls
// back to waitPoll when something is owed or a sleep ends otherwise.
func TestNextPollBacksOffWhileIdle(t *testing.T) {
	var got []time.Duration
	p := time.Duration(0)
	for range 6 {
		p = nextPoll(p, false, true)
		got = append(got, p)
	}
	want := []time.Duration{waitPoll, 8 * waitPoll, 64 * waitPoll, waitPollIdle, waitPollIdle, waitPollIdle}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("bounds after empty timeouts: %v, want %v", got, want)
		}
	}
	if p := nextPoll(waitPollIdle, true, true); p != waitPoll {
		t.Errorf("a refill owed: bound %v, want %v", p, waitPoll)
	}
	if p := nextPoll(4*waitPoll, false, false); p != 4*waitPoll {
		t.Errorf("a sleep that did not time out: bound %v, want it kept at %v", p, 4*waitPoll)
	}
}
