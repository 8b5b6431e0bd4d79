package affinity

import "time"

// SlackFor is the timer slack for timed sleeps of d: an eighth of d, within
// [1µs, 50µs] (50 µs is Linux's default), so that a short nap is not
// stretched by the default slack.
func SlackFor(d time.Duration) time.Duration {
	return min(max(d/8, time.Microsecond), 50*time.Microsecond)
}
