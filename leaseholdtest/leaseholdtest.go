// Package leaseholdtest helps test programs that use leasehold: assert that
// a job was enqueued, run a handler on a job without a client, and get a
// PostgreSQL store of one's own for each test.
package leaseholdtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/jobmeta"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
)

// RequireOpts narrows what RequireEnqueued looks for.
type RequireOpts struct {
	// Queue is the job's queue. Default leasehold.DefaultQueue.
	Queue string
	// Key, when set, is the job's key.
	Key string
}

// RequireEnqueued fails tb unless st holds a job waiting to run (pending,
// delayed or behind its key) of T's kind, on the queue opts names, whose
// args equal want once both are encoded as JSON (a client with another
// Codec needs its own check), and, when opts names a
// key, with that key. It returns the first such job.
func RequireEnqueued[T leasehold.JobArgs](ctx context.Context, tb testing.TB, st store.Store, want T, opts *RequireOpts) *leasehold.Job[T] {
	tb.Helper()
	return requireEnqueued(ctx, tb, st.List, want, opts)
}

// RequireEnqueuedTx is RequireEnqueued inside the caller's transaction tx,
// before it commits: it sees the jobs tx enqueued (with Client.EnqueueTx)
// and what had committed before. st is the store the client was built on:
// a *postgres.Store with a pgx.Tx, its SQL() view or a *sqlite.Store with
// a *sql.Tx, a *memory.Store with store.NoTx.
func RequireEnqueuedTx[T leasehold.JobArgs, TTx any](ctx context.Context, tb testing.TB, st store.TxLister[TTx], tx TTx, want T, opts *RequireOpts) *leasehold.Job[T] {
	tb.Helper()
	return requireEnqueued(ctx, tb, func(ctx context.Context, f store.ListFilter) ([]store.Info, error) {
		return st.ListTx(ctx, tx, f)
	}, want, opts)
}

func requireEnqueued[T leasehold.JobArgs](ctx context.Context, tb testing.TB, list func(context.Context, store.ListFilter) ([]store.Info, error),
	want T, opts *RequireOpts) *leasehold.Job[T] {
	tb.Helper()
	o := RequireOpts{}
	if opts != nil {
		o = *opts
	}
	if o.Queue == "" {
		o.Queue = leasehold.DefaultQueue
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		tb.Fatalf("leaseholdtest: encode the wanted %s args: %v", want.Kind(), err)
	}
	var seen []string
	for _, state := range []store.State{store.Pending, store.Waiting} {
		var after int64
		for {
			infos, err := list(ctx, store.ListFilter{Queue: o.Queue, State: state, AfterID: after, Limit: store.MaxBatch})
			if err != nil {
				tb.Fatalf("leaseholdtest: list queue %q: %v", o.Queue, err)
			}
			for _, in := range infos {
				after = in.ID
				if in.Kind != want.Kind() || (o.Key != "" && in.Key != o.Key) {
					continue
				}
				seen = append(seen, string(in.Payload))
				if !jsonEqual(in.Payload, wantJSON) {
					continue
				}
				job := &leasehold.Job[T]{ID: in.ID, Kind: in.Kind, Queue: in.Queue, Key: in.Key, Attempt: in.Deliveries,
					MaxDeliveries: in.MaxDeliveries, FencingToken: in.FencingToken, EnqueuedAt: in.EnqueuedAt,
					Metadata: jobmeta.Decode(in.Attributes)}
				if err := json.Unmarshal(in.Payload, &job.Args); err != nil {
					tb.Fatalf("leaseholdtest: decode job %d: %v", in.ID, err)
				}
				return job
			}
			if len(infos) < store.MaxBatch {
				break
			}
		}
	}
	keyed := ""
	if o.Key != "" {
		keyed = fmt.Sprintf(" with key %q", o.Key)
	}
	tb.Fatalf("leaseholdtest: no %s job%s waiting on queue %q with args %s; jobs of the kind there: %q", want.Kind(), keyed, o.Queue, wantJSON, seen)
	return nil
}

// jsonEqual compares two JSON texts as values, not as bytes.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// NewJob returns a job of args as a handler sees it on its first
// delivery: ID 1, attempt 1 of 5, fencing token 1, on
// leasehold.DefaultQueue. Change its fields to test other cases.
func NewJob[T leasehold.JobArgs](args T) *leasehold.Job[T] {
	return &leasehold.Job[T]{ID: 1, Args: args, Kind: args.Kind(), Queue: leasehold.DefaultQueue, Attempt: 1,
		MaxDeliveries: store.DefaultMaxDeliveries, FencingToken: 1}
}

// Work runs h on job as the client would: the args go through the JSON
// encoding they are stored in first, so a handler test also catches args
// that do not survive it. It returns h's result; a panic in h is returned
// as an error, as the client records it. See WorkWith for a clock and a
// maximum processing time.
func Work[T leasehold.JobArgs](ctx context.Context, h leasehold.Handler[T], job *leasehold.Job[T]) error {
	return WorkWith(ctx, h, job, WorkConfig{})
}

// WorkConfig sets how WorkWith runs a handler. The zero value is Work.
type WorkConfig struct {
	// Clock times MaxProcessingTime. Default: the system clock. A fake
	// clock (package clock/clocktest) lets a test reach the limit without
	// waiting for it.
	Clock clock.Clock
	// MaxProcessingTime, when positive, cancels the handler's context with
	// cause leasehold.ErrMaxProcessingTime once it has run that long, as
	// the client does.
	MaxProcessingTime time.Duration
}

// WorkWith is Work under cfg.
func WorkWith[T leasehold.JobArgs](ctx context.Context, h leasehold.Handler[T], job *leasehold.Job[T], cfg WorkConfig) (err error) {
	b, err := json.Marshal(job.Args)
	if err != nil {
		return fmt.Errorf("leaseholdtest: encode the %s args: %w", job.Kind, err)
	}
	stored := *job
	var args T
	if err := json.Unmarshal(b, &args); err != nil {
		return fmt.Errorf("leaseholdtest: decode the %s args: %w", job.Kind, err)
	}
	stored.Args = args
	if cfg.MaxProcessingTime > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		limit := clock.OrSystem(cfg.Clock).AfterFunc(cfg.MaxProcessingTime, func() { cancel(leasehold.ErrMaxProcessingTime) })
		defer func() {
			limit.Stop()
			cancel(context.Canceled)
		}()
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("leaseholdtest: the %s handler panicked: %v", job.Kind, v)
		}
	}()
	return h(ctx, &stored)
}

// PostgresStore returns a store in a fresh schema of the PostgreSQL
// database at dsn, migrated; the schema is dropped and the store closed
// when the test ends. Tests that use it may run in parallel.
func PostgresStore(tb testing.TB, dsn string) *postgres.Store {
	tb.Helper()
	ctx := context.Background()
	pc, err := postgres.PoolConfig(dsn)
	if err != nil {
		tb.Fatalf("leaseholdtest: %v", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		tb.Fatalf("leaseholdtest: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "leasehold_test_" + hex.EncodeToString(b[:])
	if err := postgres.Migrate(ctx, pool, schema); err != nil {
		pool.Close()
		tb.Fatalf("leaseholdtest: migrate schema %s: %v", schema, err)
	}
	st, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		pool.Close()
		tb.Fatalf("leaseholdtest: open schema %s: %v", schema, err)
	}
	tb.Cleanup(func() {
		st.Close()
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("leaseholdtest: drop schema %s: %v", schema, err)
		}
		pool.Close()
	})
	return st
}
