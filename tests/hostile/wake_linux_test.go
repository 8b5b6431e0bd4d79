package hostile

import (
	"strings"
	"testing"
	"time"

	"github.com/vnic/vnic/client"
)

// TestIntegrationHostileWakeChannel: a tenant that tries to pass vnicd a
// lingering socket through its doorbell, makes the doorbell blocking,
// hangs 4,000 epoll waiters on it, parks 64 threads on its signal word and
// makes vnicd signal it on every batch while it rings without pause. The
// descriptor must be refused, and the good tenant keeps >= 90% of its rate
// in every 250 ms window (none empty), with vnicd's pid unchanged and every buffer of the good tenant in one
// place at the end (census).
func TestIntegrationHostileWakeChannel(t *testing.T) {
	needRoot(t)
	const claimed = 32 // ports of the attacker's rule: frames, so that vnicd signals it
	h := start(t, nil)
	var win *windows
	var ready string
	h.attack("the wake-up channel turned against vnicd for 4 s", func() {
		win = h.sample(250 * time.Millisecond)
		t0 := time.Now()
		c := h.child("wake", params{N: 4000, Repeat: 64, Attach: client.AttachOptions{Name: "waker", Match: client.Match{Proto: "udp", DstPortLo: 65535 - claimed + 1, DstPortHi: 65535}}})
		ready = c.ready
		t1 := time.Now()
		win.observe(4*time.Second, 12*time.Second)
		t2 := time.Now()
		t.Logf("attacker: %s (set up in %v, stopped in %v)", c.stop(), t1.Sub(t0).Round(time.Millisecond), time.Since(t2).Round(time.Millisecond))
		win.stop()
	})
	if !strings.Contains(ready, "SCM_RIGHTS on the doorbell refused") || !strings.Contains(ready, "4000 epoll waiters") {
		t.Errorf("the attack did not set up as planned: %s", ready)
	}
	// The attacker's rule takes its share of the synthetic source's 1,024
	// destination ports from the good (default) tenant.
	win.check(t, h.baseRate*(1024-claimed)/1024, 0.9)
	h.census()
}

// TestIntegrationHostileFutexHash: a tenant that loads the kernel's futex
// hash against vnicd's signals, with no thread per waiter (io_uring):
// first 50,000 waiters on its own signal word, requeued to another word
// and back in a loop while vnicd signals it on every batch (each requeue
// holds the word's hash bucket for milliseconds, and a FUTEX_WAKE on the
// engine's thread spun that long); then 100,000 waiters on words of its
// own, which lengthen every bucket of the shared hash. The good tenant
// keeps >= 80% of its rate in every 250 ms window (the engine never makes
// the wake-up itself: the attacker's signalling thread does, and backs off
// after a slow one).
func TestIntegrationHostileFutexHash(t *testing.T) {
	needRoot(t)
	const claimed = 32
	h := start(t, nil)
	// The storm holds a CPU in the kernel, where it cannot be preempted,
	// for milliseconds at a time: on two CPUs that takes a share from
	// every process, vnicd's included, whatever vnicd does.
	h.minShare = 0.8
	for _, a := range []struct {
		name string
		p    params
	}{
		{"50,000 waiters requeued in a loop on the attacker's signal word", params{N: 50000}},
		{"100,000 waiters on the attacker's own words", params{Repeat: 100000}},
	} {
		var win *windows
		var ready string
		st0, _ := h.status()
		h.attack(a.name+" for 4 s", func() {
			win = h.sample(250 * time.Millisecond)
			a.p.Attach = client.AttachOptions{Name: "futex", Match: client.Match{Proto: "udp", DstPortLo: 65535 - claimed + 1, DstPortHi: 65535}}
			c := h.child("futex", a.p)
			ready = c.ready
			win.observe(4*time.Second, 12*time.Second)
			t.Logf("attacker: %s; %s", ready, c.stop())
			win.stop()
		})
		if !strings.Contains(ready, "io_uring futex waiters parked") {
			if strings.Contains(ready, "not supported") || strings.Contains(ready, "unsupported") {
				t.Skipf("io_uring futex waits are not available here, so the attack cannot run: %s", ready)
			}
			t.Fatalf("the attack did not set up as planned: %s", ready)
		}
		win.check(t, h.baseRate*(1024-claimed)/1024, 0.8)
		if st1, err := h.status(); err == nil {
			t.Logf("%s: vnicd sent %d signals, %d of them slow (the signaller backed off after each)", a.name, st1.Signals-st0.Signals, st1.SlowSignals-st0.SlowSignals)
		}
	}
	h.census()
}
