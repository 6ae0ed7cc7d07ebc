package leasehold_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold"
)

// A paused queue's jobs wait, however long, while other queues run; once
// resumed they run at once.
func TestQueuePauseAndResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newClient(t, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}, "billing": {}}})
		var ran atomic.Int64
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
			ran.Add(1)
			return nil
		})
		if err := c.QueuePause(ctx, "default"); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Stop(ctx)
		for range 3 {
			if _, err := c.Enqueue(ctx, sendEmail{To: "ann"}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Enqueue(ctx, sendEmail{To: "bob"}, &leasehold.EnqueueOptions{Queue: "billing"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the job of the running queue", func() bool { return ran.Load() == 1 })
		time.Sleep(time.Hour)
		synctest.Wait()
		if s := count(t, st, "default"); ran.Load() != 1 || s.Pending != 3 || !s.Paused {
			t.Fatalf("after an hour paused: ran %d, stats %+v; want 1 run and 3 pending", ran.Load(), s)
		}
		if err := c.QueueResume(ctx, "default"); err != nil {
			t.Fatal(err)
		}
		// The wake-up reaches the waiting claim loop: no poll interval passes.
		synctest.Wait()
		if s := count(t, st, "default"); ran.Load() != 4 || s.Completed != 3 || s.Paused {
			t.Fatalf("after Resume: ran %d, stats %+v; want all 4 run", ran.Load(), s)
		}
		if err := c.QueuePause(ctx, ""); err == nil {
			t.Fatal("QueuePause of an empty name succeeded")
		}
	})
}
