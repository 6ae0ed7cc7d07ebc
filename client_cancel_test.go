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

// BenchmarkCancelFromAnotherProcess measures, on PostgreSQL, the time from
// a cancel by another process to the end of the running job's context,
// reported as ms/cancel.
func BenchmarkCancelFromAnotherProcess(b *testing.B) {
	ctx := context.Background()
	_, other, c, started, causes := cancelFixture(b)
	var total time.Duration
	for b.Loop() {
		job, err := c.Enqueue(ctx, sendEmail{To: "slow"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		<-started
		t0 := time.Now()
		if _, err := other.Cancel(ctx, "", []int64{job.ID}); err != nil {
			b.Fatal(err)
		}
		<-causes
		total += time.Since(t0)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/cancel")
}

// cancelFixture starts a client on one PostgreSQL store whose handler
// runs until cancelled, with a heartbeat of an hour; other is a second
// store of the same schema, as another process has.
func cancelFixture(tb testing.TB) (worker, other store.Store, c *leasehold.Client[store.NoTx], started chan int64, causes chan error) {
	ctx := context.Background()
	pool := pgtest.Pool(tb)
	schema := pgtest.Schema(tb, pool)
	open := func() store.Store {
		st, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: schema})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { st.Close() })
		return st
	}
	worker, other = open(), open()
	cfg := leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}},
		LeaseDuration: 3 * time.Hour, HeartbeatInterval: time.Hour, Logger: quiet()}
	c, err := leasehold.NewClient(store.WithoutTx(worker), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	started, causes = make(chan int64, 1), make(chan error, 1)
	leasehold.AddHandler(c, func(ctx context.Context, job *leasehold.Job[sendEmail]) error {
		started <- job.ID
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	})
	if err := c.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Stop(ctx) })
	return worker, other, c, started, causes
}

// On PostgreSQL a job cancelled by another process stops at once: the
// cancel's notification makes the worker renew its leases, where the
// heartbeat here would wait an hour.
func TestCancelFromAnotherProcess(t *testing.T) {
	ctx := context.Background()
	_, other, c, started, causes := cancelFixture(t)
	job, err := c.Enqueue(ctx, sendEmail{To: "slow"}, nil)
	if err != nil {
		t.Fatal(err)
	}
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
