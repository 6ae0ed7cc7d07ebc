package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/store"
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

// A cancelled job never runs again: waiting, it is skipped; running, its
// handler's context ends with ErrCancelled at once, not at the next
// heartbeat, and the job stays cancelled.
func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const heartbeat = 10 * time.Second
		c, st := newClient(t, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}},
			LeaseDuration: 30 * time.Second, HeartbeatInterval: heartbeat})
		started := make(chan int64, 10)
		causes := make(chan error, 10)
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
			started <- job.ID
			if job.Args.To == "quick" {
				return nil
			}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return context.Cause(ctx)
		})
		waiting, err := c.Enqueue(ctx, sendEmail{To: "never"}, &leasehold.EnqueueOptions{Delay: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Cancel(ctx, waiting.ID); err != nil {
			t.Fatal(err)
		}
		running, err := c.Enqueue(ctx, sendEmail{To: "slow"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Stop(ctx)
		if id := <-started; id != running.ID {
			t.Fatalf("started job %d, want %d", id, running.ID)
		}
		cancelledAt := time.Now()
		if err := c.Cancel(ctx, running.ID); err != nil {
			t.Fatal(err)
		}
		if cause := <-causes; !errors.Is(cause, leasehold.ErrCancelled) {
			t.Fatalf("the running job's context ended with %v, want ErrCancelled", cause)
		}
		if took := time.Since(cancelledAt); took >= heartbeat {
			t.Fatalf("the running job was stopped %s after Cancel, at a heartbeat; want at once", took)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if s := count(t, st, "default"); s.Cancelled != 2 || s.Pending+s.Processing+s.Completed+s.Dead != 0 || len(started) != 0 {
			t.Fatalf("an hour after: stats %+v, %d more starts; want both cancelled and nothing run again", s, len(started))
		}
		if err := c.Cancel(ctx, running.ID); !errors.Is(err, leasehold.ErrAlreadyFinished) {
			t.Fatalf("Cancel of a cancelled job: %v, want ErrAlreadyFinished", err)
		}
		if err := c.Cancel(ctx, 987654); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Cancel of no job: %v, want store.ErrNotFound", err)
		}
	})
}

// Jobs of higher priority run first, and see their priority.
func TestEnqueuePriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, _ := newClient(t, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {Concurrency: 1}}})
		var mu sync.Mutex
		var order []string
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, fmt.Sprintf("%s:%d", job.Args.To, job.Priority))
			return nil
		})
		for _, e := range []struct {
			to       string
			priority int
		}{{"low", -1}, {"default", 0}, {"high", 9}} {
			if _, err := c.Enqueue(ctx, sendEmail{To: e.to}, &leasehold.EnqueueOptions{Priority: e.priority}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Enqueue(ctx, sendEmail{To: "x"}, &leasehold.EnqueueOptions{Priority: 1001}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("priority 1001: %v, want ErrInvalid", err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Stop(ctx)
		waitFor(t, "every job", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(order) == 3
		})
		mu.Lock()
		defer mu.Unlock()
		if got := strings.Join(order, " "); got != "high:9 default:0 low:-1" {
			t.Fatalf("ran %s, want high:9 default:0 low:-1", got)
		}
	})
}

// The client's cleaner deletes completed jobs after CompletedRetention;
// KeepForever keeps dead ones.
func TestClientCleansFinishedJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, st := newClient(t, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}},
			CompletedRetention: time.Hour, DeadRetention: leasehold.KeepForever})
		leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
			if job.Args.To == "nobody" {
				return leasehold.Permanent(errors.New("no such mailbox"))
			}
			return nil
		})
		for _, to := range []string{"ann", "nobody"} {
			if _, err := c.Enqueue(ctx, sendEmail{To: to}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Stop(ctx)
		waitFor(t, "both jobs", func() bool { s := count(t, st, "default"); return s.Completed == 1 && s.Dead == 1 })
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if s := count(t, st, "default"); s.Completed != 0 || s.Dead != 1 {
			t.Fatalf("two hours on: %+v, want the completed job deleted and the dead one kept", s)
		}
	})
}

// A retention that is neither positive nor KeepForever is refused, naming
// the field.
func TestRetentionIsChecked(t *testing.T) {
	err := leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}}, DeadRetention: -time.Second}.Validate()
	if err == nil || !strings.Contains(err.Error(), "DeadRetention is -1s") {
		t.Fatalf("Validate = %v, want an error naming DeadRetention", err)
	}
}
