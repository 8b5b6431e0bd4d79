package fabric

import (
	"sync/atomic"

	"github.com/vnic/vnic/nic"
)

// delayLine is a ring of fixed slots holding delayed frames in due order.
type delayLine struct {
	slots []slot
	data  []byte
	size  int // bytes per slot
	mask  uint64
	delay uint64 // ns
	head  uint64 // oldest frame
	tail  uint64 // next free slot
	lent  int    // frames the last Recv handed out, released by the next
	count atomic.Int64
}

type slot struct {
	due      uint64
	n        int
	src, dst *host
}

func newDelayLine(n, size int, delay uint64) *delayLine {
	return &delayLine{slots: make([]slot, n), data: make([]byte, n*size), size: size, mask: uint64(n - 1), delay: delay}
}

// room returns the next free slot's first n bytes, or nil when the line is
// full or n exceeds a slot; the slot stays free until commit.
func (l *delayLine) room(n int) []byte {
	if l.tail-l.head == uint64(len(l.slots)) || n > l.size {
		return nil
	}
	off := int(l.tail&l.mask) * l.size
	return l.data[off : off+n : off+n]
}

// commit adds the frame copied into room's slot, due delay after now.
func (l *delayLine) commit(n int, now uint64, src, dst *host) {
	l.slots[l.tail&l.mask] = slot{due: now + l.delay, n: n, src: src, dst: dst}
	src.line++
	dst.line++
	l.tail++
	l.count.Add(1)
}

func (l *delayLine) release() {
	for k := 0; k < l.lent; k++ {
		s := &l.slots[l.head&l.mask]
		s.src, s.dst = nil, nil
		l.head++
	}
	l.lent = 0
}

// take appends the frames due by now, up to cap(dst), lent out until the
// next take; frames to a detached host are dropped as no_host.
func (l *delayLine) take(dst [][]byte, now uint64, f *Fabric) [][]byte {
	l.release()
	for p := l.head; p != l.tail && len(dst) < cap(dst); p++ {
		s := &l.slots[p&l.mask]
		if s.due > now {
			break
		}
		s.src.line--
		s.dst.line--
		if s.dst.left.Load() {
			f.charge(s.src, NoHost)
		} else {
			off := int(p&l.mask) * l.size
			dst = append(dst, l.data[off:off+s.n:off+s.n])
			f.charge(s.src, Delivered)
			f.charge(s.dst, Received)
		}
		l.lent++
	}
	if l.lent > 0 {
		l.count.Add(int64(-l.lent))
	}
	return dst
}

// Source returns the fabric's nic.Source, for nic.Engine.Run: it releases
// delayed frames once due (see the package doc).
func (f *Fabric) Source() nic.Source {
	if f.delay == nil {
		return quiet{}
	}
	return delayed{f}
}

type quiet struct{}

func (quiet) Recv(dst [][]byte) ([][]byte, error) { return dst, nil }
func (quiet) WaitFDs() []int                      { return nil }

type delayed struct{ f *Fabric }

func (d delayed) Recv(dst [][]byte) ([][]byte, error) {
	f := d.f
	var now uint64
	if f.rx != nil {
		now = f.rx.Now()
	}
	dst = f.delay.take(dst, now, f)
	if tab := f.hosts.Load(); f.delay.lent > 0 || len(tab.left) > 0 {
		f.publish(tab)
	}
	return dst, nil
}
