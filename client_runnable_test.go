package leasehold_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/lifecycle"
)

// The client runs in a group beside a loop of the program's own; the
// group's shutdown drains the client's running job.
func TestClientInAGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newClient(t, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}}})
		started := make(chan struct{})
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
			close(started)
			time.Sleep(10 * time.Second)
			return nil
		})
		ticks := 0
		own := lifecycle.Func(func(ctx context.Context) error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Second):
					ticks++
				}
			}
		})
		g, err := lifecycle.NewGroup(lifecycle.GroupConfig{}, c.Runnable(), own)
		if err != nil {
			t.Fatal(err)
		}
		ran := make(chan error, 1)
		go func() { ran <- g.Run(ctx) }()
		if _, err := c.Enqueue(ctx, sendEmail{To: "ann"}, nil); err != nil {
			t.Fatal(err)
		}
		<-started
		time.Sleep(3 * time.Second) // the job runs 10 s
		if err := g.Shutdown(ctx); err != nil {
			t.Fatalf("group shutdown: %v", err)
		}
		if err := <-ran; err != nil {
			t.Fatalf("group run: %v", err)
		}
		if s := count(t, st, "default"); s.Completed != 1 {
			t.Fatalf("after the group stopped: %+v, want the running job finished", s)
		}
		if ticks == 0 {
			t.Fatal("the program's own loop never ran")
		}
	})
}

// Ending Run's context stops the client at once: the running job's
// context is cancelled and its lease released.
func TestClientRunnableHardStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, st := newClient(t, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}}})
		started := make(chan struct{})
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
			close(started)
			<-ctx.Done()
			return context.Cause(ctx)
		})
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- c.Runnable().Run(ctx) }()
		synctest.Wait()
		if _, err := c.Enqueue(context.Background(), sendEmail{To: "ann"}, nil); err != nil {
			t.Fatal(err)
		}
		<-started
		cancel()
		if err := <-ran; err == nil {
			t.Fatal("a hard stop returned nil")
		}
		if s := count(t, st, "default"); s.Pending != 1 || s.Processing != 0 {
			t.Fatalf("after the hard stop: %+v, want the job back to pending", s)
		}
	})
}

func TestClientReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, _ := newClient(t, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}}})
		if err := c.Ready(ctx); err == nil {
			t.Fatal("ready before Start")
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Ready(ctx); err != nil {
			t.Fatalf("not ready while working: %v", err)
		}
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Ready(ctx); err == nil {
			t.Fatal("ready after Stop")
		}
	})
}
