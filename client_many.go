package leasehold

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/store"
)

// EnqueueParams is one job of EnqueueMany: its args and options, as
// Enqueue takes them. A nil Options means the defaults.
type EnqueueParams struct {
	// Args are the job's arguments.
	Args JobArgs
	// Options are the job's options, or nil.
	Options *EnqueueOptions
}

// EnqueueMany puts jobs on their queues in one store call, all or none,
// each prepared as Enqueue prepares it, its enqueue middleware included.
// The results are in the order of params: each names its job, or, for a
// duplicate, the job it repeats, which may be an earlier job of the same
// call (its dedup id repeated within the batch) or one enqueued before.
// Jobs with a key join their key's line in the order of params.
//
// A job that cannot be enqueued (nil args, an empty kind, args the Codec
// cannot encode, an option out of range, an unknown kind on a queue the
// client works, a middleware's refusal) fails the whole call with an
// error naming its index in params, from 0, and nothing is enqueued. A
// call of more than store.MaxBatch (10,000) jobs is refused whole rather
// than split, as parts enqueued one after another could not be all or
// none: a program with more jobs makes several calls, each all or none on
// its own. An empty params enqueues nothing and returns no results.
//
// On PostgreSQL, jobs without keys, dedup ids or unique options go in
// one statement, with the wakeup of their queues, in one round trip; a
// batch with any of them takes their locks and inserts its jobs one by
// one in one transaction. On SQLite a call is one transaction.
func (c *Client[TTx]) EnqueueMany(ctx context.Context, params []EnqueueParams) ([]EnqueueResult, error) {
	return c.enqueue(ctx, params, "", false, func(ctx context.Context, msgs []store.NewMessage) ([]store.Enqueued, error) {
		return c.st.Enqueue(ctx, msgs)
	})
}

// EnqueueManyTx is EnqueueMany inside the caller's transaction tx, as
// EnqueueTx is Enqueue: the jobs become visible when tx commits and
// vanish if it rolls back. A duplicate may name a job that tx enqueued
// itself. On PostgreSQL the locks of the jobs' keys and dedup ids are
// held until tx ends; a database/sql transaction (through the store's
// SQL view) takes its jobs one statement each, a pgx.Tx as EnqueueMany
// does.
func (c *Client[TTx]) EnqueueManyTx(ctx context.Context, tx TTx, params []EnqueueParams) ([]EnqueueResult, error) {
	return c.enqueue(ctx, params, " in a transaction", false, func(ctx context.Context, msgs []store.NewMessage) ([]store.Enqueued, error) {
		return c.st.EnqueueTx(ctx, tx, msgs)
	})
}

// enqueue is every enqueue's one way to the store: it resolves each job
// of params, runs it through its enqueue middleware, and gives the
// messages to put in one call, from inside the middleware of every job:
// each job's middleware wraps the next job's, each under ctx, so that all
// of them see the batch's one outcome. where, when not empty, says where
// put enqueues, for errors; single marks Enqueue's and EnqueueTx's one
// job, whose errors name its kind rather than its index.
func (c *Client[TTx]) enqueue(ctx context.Context, params []EnqueueParams, where string, single bool,
	put func(context.Context, []store.NewMessage) ([]store.Enqueued, error)) ([]EnqueueResult, error) {
	n := len(params)
	switch {
	case n == 0:
		return []EnqueueResult{}, nil
	case n > store.MaxBatch:
		return nil, fmt.Errorf("leasehold: enqueue many%s: %d jobs, the limit is %d a call (store.MaxBatch): a call is all or none, so it is not split; make several calls",
			where, n, store.MaxBatch)
	}
	name := func(i int, err error) error {
		if single {
			return fmt.Errorf("leasehold: %w", err)
		}
		return fmt.Errorf("leasehold: job at index %d of %d: %w", i, n, err)
	}
	resolved := make([]EnqueueParams, n)
	for i, p := range params {
		var err error
		if resolved[i], err = resolve(p); err != nil {
			return nil, name(i, err)
		}
	}
	msgs := make([]store.NewMessage, n)
	holders := make([]enqueued, n)
	results := make([]EnqueueResult, n)
	stored := false
	var failed error // the first error, where it arose
	fail := func(err error) error {
		if failed == nil {
			failed = err
		}
		return err
	}
	// run runs job i's middleware, or, past the last job, the store call
	// under inner, the context the last job's innermost middleware gave
	// its next (a deadline or a span it set applies to the store call).
	var run func(i int, inner context.Context) error
	run = func(i int, inner context.Context) error {
		if i == n {
			if stored {
				// A middleware that calls next again once the jobs are
				// stored gets an error rather than a second copy of each.
				return fmt.Errorf("leasehold: enqueue%s: a middleware called next again after the jobs were enqueued; they were not enqueued again", where)
			}
			res, err := put(inner, msgs)
			if err != nil {
				return fail(c.storeError(err, msgs, where, single, name))
			}
			for j, r := range res {
				results[j] = EnqueueResult{ID: r.ID, Duplicate: r.Duplicate}
				holders[j].res = &results[j]
			}
			stored = true
			return nil
		}
		refused := func(mw int, err error) error {
			if stored {
				// Its own error after its next stored the jobs: not a
				// refusal, and the caller must not take it for one.
				return name(i, fmt.Errorf("enqueue a %s job: middleware %d failed after the job was enqueued: %w", resolved[i].Args.Kind(), mw, err))
			}
			return fail(name(i, fmt.Errorf("enqueue a %s job: middleware %d refused it: %w", resolved[i].Args.Kind(), mw, err)))
		}
		return c.through(ctx, &resolved[i], &holders[i], refused, func(inner context.Context) error {
			var err error
			if msgs[i], err = c.message(resolved[i]); err != nil {
				return fail(name(i, err))
			}
			return run(i+1, inner)
		})
	}
	err := run(0, ctx)
	switch {
	case err != nil:
		return nil, err
	case stored:
		// An error before the store call that a middleware answered by
		// calling next again (a retry) no longer stands.
		return results, nil
	case failed != nil:
		// A middleware returned nil over an error: the jobs are not stored.
		return nil, failed
	case !stored:
		return nil, fmt.Errorf("leasehold: enqueue%s: a middleware returned without calling next and without an error; nothing was enqueued", where)
	}
	return results, nil
}

// storeError names the job a store's refusal of msgs is about, or the
// batch when it is about none.
func (c *Client[TTx]) storeError(err error, msgs []store.NewMessage, where string, single bool, name func(int, error) error) error {
	n := len(msgs)
	if bad, ok := errors.AsType[*store.BatchError](err); ok && bad.Len == n {
		return name(bad.Index, fmt.Errorf("enqueue a %s job%s: %w", msgs[bad.Index].Kind, where, bad.Err))
	}
	if n == 1 {
		// A batch of one is refused with the reason alone.
		return name(0, fmt.Errorf("enqueue a %s job%s: %w", msgs[0].Kind, where, err))
	}
	return fmt.Errorf("leasehold: enqueue %d jobs%s: %w", n, where, err)
}
