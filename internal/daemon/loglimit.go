package daemon

import (
	"sync"
	"time"
)

// logLimiter rate-limits warnings a client can cause, per (client uid,
// reason): the first logBurst lines of a key in each logInterval are
// logged, the rest are counted, and the count goes out with the key's next
// logged line, or in a summary line at the end of the interval ("suppressed
// K similar messages"). A hostile client opening connection after
// connection then costs a few lines a minute, not one per connection.
//
// zerolog's samplers (BurstSampler and friends) count per logger, not per
// key, and cannot report what they dropped: one noisy client would then
// silence everyone else's warnings, unannounced. Hence this small type.
type logLimiter struct {
	mu       sync.Mutex
	burst    int
	interval time.Duration
	now      func() time.Time
	keys     map[logKey]*logWindow
}

// logKey is what a line is limited by: the client's uid and a fixed
// reason (a constant string, never built from client input).
type logKey struct {
	uid    uint32
	reason string
}

type logWindow struct {
	start      time.Time
	logged     int
	suppressed uint64
}

const (
	// logMaxKeys bounds the limiter's memory; past it the oldest windows
	// are summarised early and forgotten.
	logMaxKeys = 4096
)

func newLogLimiter(burst int, interval time.Duration) *logLimiter {
	return &logLimiter{burst: burst, interval: interval, now: time.Now, keys: map[logKey]*logWindow{}}
}

// allow reports whether a line for k may be logged now, and how many lines
// of k were suppressed before it (to log with it).
func (l *logLimiter) allow(k logKey) (ok bool, suppressed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	w := l.keys[k]
	if w == nil {
		if len(l.keys) >= logMaxKeys {
			l.evictLocked()
		}
		w = &logWindow{start: now}
		l.keys[k] = w
	}
	if now.Sub(w.start) >= l.interval {
		w.start, w.logged = now, 0
	}
	if w.logged >= l.burst {
		w.suppressed++
		return false, 0
	}
	w.logged++
	suppressed, w.suppressed = w.suppressed, 0
	return true, suppressed
}

// logSummary is one key's count of lines suppressed in an interval that
// ended.
type logSummary struct {
	key        logKey
	suppressed uint64
}

// due returns, and resets, the suppressed counts of every key whose
// interval has ended; keys idle for a whole interval are forgotten.
func (l *logLimiter) due() []logSummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var out []logSummary
	for k, w := range l.keys {
		if now.Sub(w.start) < l.interval {
			continue
		}
		if w.suppressed > 0 {
			out = append(out, logSummary{k, w.suppressed})
		}
		delete(l.keys, k)
	}
	return out
}

// evictLocked forgets the oldest key (and its count): it runs only when
// logMaxKeys keys are live, a flood of distinct uids (under mu).
func (l *logLimiter) evictLocked() {
	var oldest logKey
	var first time.Time
	for k, w := range l.keys {
		if first.IsZero() || w.start.Before(first) {
			oldest, first = k, w.start
		}
	}
	delete(l.keys, oldest)
}
