package client_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/vnic/vnic/client"
	"github.com/vnic/vnic/shm"
)

// TestNilAndClosedTenant: the methods of a nil tenant (what Attach returns
// with an error), of a closed one and of their queues return ErrClosed or
// do nothing; none panics.
func TestNilAndClosedTenant(t *testing.T) {
	ten, err := client.Attach(context.Background(), filepath.Join(t.TempDir(), "none.sock"), client.AttachOptions{Queues: 2})
	if err == nil || ten != nil {
		t.Fatalf("Attach to a missing socket: %v, %v", ten, err)
	}
	check := func(name string, ten *client.Tenant) {
		t.Helper()
		if err := ten.Close(); !errors.Is(err, client.ErrClosed) {
			t.Errorf("%s: Close: %v", name, err)
		}
		if err := ten.Err(); !errors.Is(err, client.ErrClosed) {
			t.Errorf("%s: Err: %v", name, err)
		}
		if n := ten.Queues(); n != 0 {
			t.Errorf("%s: Queues %d", name, n)
		}
		for _, i := range []int{-1, 0, 1, 7} {
			q := ten.Queue(i)
			if err := q.Wait(context.Background()); !errors.Is(err, client.ErrClosed) {
				t.Errorf("%s: Queue(%d).Wait: %v", name, i, err)
			}
			if got, err := q.Recv(make([]client.Packet, 0, 4)); len(got) != 0 || !errors.Is(err, client.ErrClosed) {
				t.Errorf("%s: Recv returned %d packets, %v", name, len(got), err)
			}
			if err := q.Release([]client.Packet{{Buf: 1}}); !errors.Is(err, client.ErrClosed) {
				t.Errorf("%s: Release: %v", name, err)
			}
			if n, err := q.Send([][]byte{{1, 2, 3}}); n != 0 || !errors.Is(err, client.ErrClosed) {
				t.Errorf("%s: Send: %d, %v", name, n, err)
			}
			if err := q.Err(); !errors.Is(err, client.ErrClosed) {
				t.Errorf("%s: Queue(%d).Err: %v", name, i, err)
			}
			if q.Owed() != 0 || q.TxPending() != 0 {
				t.Errorf("%s: Owed %d TxPending %d", name, q.Owed(), q.TxPending())
			}
			q.Counters()
			q.ID()
		}
	}
	check("nil", ten)

	g := shm.Queues(2, 64, 128, 64, 2048, 2*64+2*128)
	r, err := shm.Create(g, shm.Options{Name: "client-closed-test", NoHuge: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	local, err := client.Local(r, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if local.Queues() != 2 || local.Queue(1) == nil || local.Queue(2) != nil {
		t.Fatalf("open tenant: %d queues, Queue(2) %v", local.Queues(), local.Queue(2))
	}
	q := local.Queue(0) // kept across Close, as a goroutine would
	if err := local.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	check("closed", local)
	if err := q.Wait(context.Background()); !errors.Is(err, client.ErrClosed) {
		t.Errorf("a queue kept across Close: Wait %v", err)
	}
	if got, _ := q.Recv(nil); got != nil {
		t.Errorf("a queue kept across Close received %d", len(got))
	}
}
