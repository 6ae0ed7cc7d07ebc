package leasehold_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
)

// On PostgreSQL a job cancelled by another process stops at once: the
// cancel's notification makes the worker renew its leases, where the
// heartbeat here would wait an hour.
func TestCancelFromAnotherProcess(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	open := func() store.Store {
		st, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	worker, other := open(), open()
	c := clientOf(t, worker, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}},
		LeaseDuration: 3 * time.Hour, HeartbeatInterval: time.Hour})
	started := make(chan int64, 1)
	causes := make(chan error, 1)
	leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
		started <- job.ID
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	})
	job, err := c.Enqueue(ctx, sendEmail{To: "slow"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	<-started
	if _, err := other.Cancel(ctx, "", []int64{job.ID}); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, leasehold.ErrCancelled) {
			t.Fatalf("the job's context ended with %v, want ErrCancelled", cause)
		}
	case <-time.After(time.Minute):
		t.Fatal("the job cancelled by another process still ran a minute later")
	}
}
