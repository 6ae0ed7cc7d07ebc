package clock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold/clock"
)

func TestSystemClockInSyncTestBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clock.System()
		if loc := c.Now().Location(); loc != time.UTC {
			t.Fatalf("Now is in %s, want UTC", loc)
		}
		m0 := c.Monotonic()
		if err := c.Sleep(context.Background(), time.Hour); err != nil {
			t.Fatal(err)
		}
		if got := c.Monotonic() - m0; got != time.Hour {
			t.Fatalf("Sleep(1h) moved monotonic time by %s", got)
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		m1 := c.Monotonic()
		if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Sleep past the context's deadline = %v", err)
		}
		if got := c.Monotonic() - m1; got != time.Minute {
			t.Fatalf("Sleep returned after %s, want 1m (the context's deadline)", got)
		}

		fired := make(chan struct{})
		c.AfterFunc(time.Second, func() { close(fired) })
		tk := c.NewTicker(time.Second)
		defer tk.Stop()
		<-tk.C()
		<-fired
	})
}

func TestOrSystem(t *testing.T) {
	if clock.OrSystem(nil) == nil {
		t.Fatal("OrSystem(nil) returned nil")
	}
	c := clock.System()
	if clock.OrSystem(c) != c {
		t.Fatal("OrSystem replaced a non-nil clock")
	}
}
