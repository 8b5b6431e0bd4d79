package testutil

import (
	"testing"
	"time"
)

// WaitFor polls cond every 2 ms until it holds and fails the test (FailNow)
// when it still does not after timeout, naming what it waited for: "timed
// out after 5s waiting for the daemon to listen". A caller that wants
// state in the failure message logs it in a deferred function that checks
// tb.Failed().
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	end := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(end) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
