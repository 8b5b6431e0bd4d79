// Package conserve checks buffer conservation: at every moment each packet
// buffer of a region is in exactly one place (an Ax ring, the NIC, a Bx ring,
// the application, or the allocator). The engine and the receive queues move
// buffers between places with compare-and-swap, so a buffer consumed twice,
// delivered twice or freed twice is caught at the moment it happens.
//
// It is a debug aid for tests, the property test and the simulator: vnicd
// enables it with vnicd demo --debug-conservation (the demo tenant's
// consumers share its process). All methods are safe for concurrent
// use; Move allocates nothing.
package conserve

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Place is where a buffer is.
type Place uint32

// The places a buffer can be.
const (
	Allocator Place = iota // free, in the two-level allocator
	Ax                     // posted in an Ax ring, waiting for a frame
	NIC                    // taken by the engine, frame being written
	Bx                     // delivered in a Bx ring, not yet polled
	App                    // polled by the application, not yet released
	NumPlaces
)

var placeNames = [NumPlaces]string{"allocator", "ax", "nic", "bx", "app"}

func (p Place) String() string {
	if p < NumPlaces {
		return placeNames[p]
	}
	return fmt.Sprintf("place(%d)", uint32(p))
}

// Checker tracks the place of every buffer of one region.
type Checker struct {
	state      []atomic.Uint32
	violations atomic.Uint64
	mu         sync.Mutex
	first      []string // the first few violations, for the report
}

// New returns a checker for bufs buffers, all in place start.
func New(bufs int, start Place) *Checker {
	c := &Checker{state: make([]atomic.Uint32, bufs)}
	for i := range c.state {
		c.state[i].Store(uint32(start))
	}
	return c
}

// Move records that buf went from one place to another. It reports false,
// and counts a violation, when buf was not where the caller thought.
func (c *Checker) Move(buf uint32, from, to Place) bool {
	if c == nil {
		return true
	}
	if int(buf) >= len(c.state) {
		c.violation(fmt.Sprintf("buffer %d out of range moved %s -> %s", buf, from, to))
		return false
	}
	if c.state[buf].CompareAndSwap(uint32(from), uint32(to)) {
		return true
	}
	c.violation(fmt.Sprintf("buffer %d moved %s -> %s but it was in %s", buf, from, to, Place(c.state[buf].Load())))
	return false
}

func (c *Checker) violation(msg string) {
	c.violations.Add(1)
	c.mu.Lock()
	if len(c.first) < 10 {
		c.first = append(c.first, msg)
	}
	c.mu.Unlock()
}

// Violations returns how many moves were wrong and the first few of them.
func (c *Checker) Violations() (uint64, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.violations.Load(), append([]string(nil), c.first...)
}

// Count returns how many buffers are in each place.
func (c *Checker) Count() [NumPlaces]int {
	var n [NumPlaces]int
	for i := range c.state {
		if p := c.state[i].Load(); p < uint32(NumPlaces) {
			n[p]++
		}
	}
	return n
}

// Where returns buf's place.
func (c *Checker) Where(buf uint32) Place { return Place(c.state[buf].Load()) }
