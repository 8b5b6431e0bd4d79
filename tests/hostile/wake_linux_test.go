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
		time.Sleep(4 * time.Second)
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
