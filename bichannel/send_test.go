package bichannel

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vnic/vnic/bichannel/transport/lossytest"
)

// Config.SendTimeout bounds the wait for credits of SendTagged, as of
// Send, but not of SendTaggedContext, whatever its context: given
// context.Background() it waits on until the Endpoint closes.
func TestSendTimeoutOnlyWithoutContext(t *testing.T) {
	cfg := testConfig()
	cfg.Workers = 1
	cfg.SendTimeout = 50 * time.Millisecond
	eps, _ := lossyCluster(t, 2, cfg, lossytest.Config{})
	a := eps[0]
	for i := range cfg.BuffersPerFlow * cfg.Flows { // node 1 never receives: no credit comes back
		if err := a.Send(1, 0, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.SendTagged(1, 0, []byte("timed"), 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SendTagged without credits: %v, want an error wrapping context.DeadlineExceeded", err)
	}
	blocked := make(chan error, 1)
	go func() {
		_, err := a.SendTaggedContext(context.Background(), 1, 0, []byte("untimed"), 2)
		blocked <- err
	}()
	select {
	case err := <-blocked:
		t.Fatalf("SendTaggedContext(context.Background()) returned within 10 × SendTimeout: %v", err)
	case <-time.After(10 * cfg.SendTimeout):
	}
	a.Close()
	select {
	case err := <-blocked:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("SendTaggedContext after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SendTaggedContext still blocked after Close")
	}
}
