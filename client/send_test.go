package client_test

import (
	"errors"
	"testing"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/ring"
	"github.com/vnic/vnic/shm"
)

// Send posts every frame with its bytes in a buffer of its own, stops at
// a frame longer than a buffer with ErrTooBig after posting those before
// it, and stops short without an error when the allocator runs out.
func TestSendPostsEveryFrame(t *testing.T) {
	const txSize, bufs, bufSize = 256, 200, 256
	g := shm.Queues(1, 8, 16, txSize, bufSize, bufs)
	ten, r := localTenant(t, g)
	q := ten.Queue(0)
	frame := func(i, n int) []byte {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(i + j)
		}
		return b
	}
	var frames [][]byte
	for i := range 100 {
		frames = append(frames, frame(i, 60+i))
	}
	n, err := q.Send(frames)
	if n != 100 || err != nil {
		t.Fatalf("Send of 100 frames: %d, %v", n, err)
	}
	tooBig := [][]byte{frame(100, 60), frame(101, 61), frame(102, bufSize+1), frame(103, 60)}
	if n, err := q.Send(tooBig); n != 2 || !errors.Is(err, client.ErrTooBig) {
		t.Fatalf("Send with a frame longer than a buffer: %d, %v; want 2, ErrTooBig", n, err)
	}
	frames = append(frames, tooBig[:2]...)
	// What vnicd would read: each descriptor's buffer holds its frame.
	tx, err := ring.NewConsumer[shm.TxDesc](r.TxMem(0), txSize)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tx.Peek(txSize)
	if err != nil || got != len(frames) {
		t.Fatalf("TX ring holds %d descriptors (%v), want %d", got, err, len(frames))
	}
	seen := map[uint32]bool{}
	for i := range got {
		d := tx.Slot(i)
		buf, ok := r.Buffer(d.Buf)
		if !ok || seen[d.Buf] || int(d.Len) != len(frames[i]) || string(buf[:d.Len]) != string(frames[i]) {
			t.Fatalf("descriptor %d: buffer %d (seen %v), %d bytes: not frame %d", i, d.Buf, seen[d.Buf], d.Len, i)
		}
		seen[d.Buf] = true
	}
	// 102 of 200 buffers are posted; the allocator (and the Ax ring's) hold
	// the rest: a send of more frames than buffers posts what it can.
	more := make([][]byte, 150)
	for i := range more {
		more[i] = frame(i, 60)
	}
	n, err = q.Send(more)
	if err != nil || n == 0 || n >= len(more) || got+n > bufs {
		t.Fatalf("Send beyond the free buffers: %d, %v; want some, fewer than %d, and no error", n, err, len(more))
	}
}

// SendGather posts each frame as its head followed by its body, in one
// buffer, whatever the split (either part may be empty); a frame whose
// parts together are longer than a buffer ends the call with ErrTooBig
// after the frames before it; and it allocates nothing.
func TestSendGather(t *testing.T) {
	const txSize, bufs, bufSize = 256, 200, 256
	g := shm.Queues(1, 8, 16, txSize, bufSize, bufs)
	ten, r := localTenant(t, g)
	q := ten.Queue(0)
	var want [][]byte
	var gathers []client.Gather
	for i := range 100 {
		b := make([]byte, 60+i)
		for j := range b {
			b[j] = byte(3*i + j)
		}
		split := (i * 7) % (len(b) + 1) // 0 (no head) to len(b) (no body)
		want = append(want, b)
		gathers = append(gathers, client.Gather{Head: b[:split], Body: b[split:]})
	}
	if n, err := q.SendGather(gathers); n != 100 || err != nil {
		t.Fatalf("SendGather of 100 frames: %d, %v", n, err)
	}
	head, body := make([]byte, 100), make([]byte, bufSize)
	tooBig := []client.Gather{{Head: head[:10], Body: body[:50]}, {Head: head, Body: body[:bufSize-100+1]}, {Head: head[:1], Body: body[:1]}}
	if n, err := q.SendGather(tooBig); n != 1 || !errors.Is(err, client.ErrTooBig) {
		t.Fatalf("SendGather with parts longer than a buffer together: %d, %v; want 1, ErrTooBig", n, err)
	}
	want = append(want, append(head[:10:10], body[:50]...))
	allocs := testing.AllocsPerRun(20, func() {
		if n, err := q.SendGather(tooBig[2:]); n != 1 || err != nil {
			t.Fatalf("SendGather of one frame: %d, %v", n, err)
		}
	})
	if allocs != 0 {
		t.Errorf("SendGather: %v allocations per call", allocs)
	}
	for range 21 { // AllocsPerRun's runs, and its warm-up
		want = append(want, []byte{0, 0})
	}
	tx, err := ring.NewConsumer[shm.TxDesc](r.TxMem(0), txSize)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tx.Peek(txSize)
	if err != nil || got != len(want) {
		t.Fatalf("TX ring holds %d descriptors (%v), want %d", got, err, len(want))
	}
	for i := range got {
		d := tx.Slot(i)
		buf, ok := r.Buffer(d.Buf)
		if !ok || string(buf[:d.Len]) != string(want[i]) {
			t.Fatalf("descriptor %d: buffer %d, %d bytes: not frame %d (%d bytes)", i, d.Buf, d.Len, i, len(want[i]))
		}
	}
}
