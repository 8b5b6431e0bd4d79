package hostile

import (
	"testing"
	"time"
)

// census checks that every buffer of the good tenant is in exactly one
// place: the allocator's pool or a cache, posted in one of its rings, or
// kept by its queue after a free that met a busy lock. It stops the good
// tenant's receiver (and the status prober) first, since a queue has one
// user at a time, so call it last in a test. Buffers vnicd is moving are
// in no place the tenant can see (client.Census says which moves it
// cannot follow): the census is retried for up to 3 s
// while vnicd settles (the stopped receiver lets the Bx ring fill), and
// the test fails only on a loss or a duplicate that stays.
func (h *harness) census() {
	h.t.Helper()
	h.stop()
	h.wg.Wait()
	var last error
	deadline := time.Now().Add(3 * time.Second)
	for {
		c, err := h.good.Census()
		if err == nil {
			if err = c.Err(); err == nil {
				h.t.Logf("census: %d buffers, pool %d, caches %v, in rings %d, kept by the queue %d", c.Count, c.Pool, c.Caches, c.Held[0], c.Held[1])
				return
			}
		}
		last = err
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.t.Errorf("the good tenant's buffers are not each in one place 3 s after its receiver stopped: %v", last)
}

// TestIntegrationHostileCensusAfterTraffic: after seconds of traffic to the
// good tenant (the harness's baseline), every one of its buffers is in
// exactly one place.
func TestIntegrationHostileCensusAfterTraffic(t *testing.T) {
	needRoot(t)
	h := start(t, nil)
	h.check("baseline traffic", h.baseRate)
	h.census()
}
