package leasehold

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/store"
)

// EnqueueParams is one job of EnqueueMany: its args and options, as
// Enqueue takes them. A nil Opts means the defaults.
type EnqueueParams struct {
	// Args are the job's arguments.
	Args JobArgs
	// Opts are the job's options, or nil.
	Opts *EnqueueOptions
}

// EnqueueMany puts jobs on their queues in one store call, all or none,
// each prepared as Enqueue prepares it. The results are in the order of
// params: each names its job, or, for a duplicate, the job it repeats,
// which may be an earlier job of the same call (its dedup id repeated
// within the batch) or one enqueued before. Jobs with a key join their
// key's line in the order of params.
//
// A job that cannot be enqueued (nil args, an empty kind, args the Codec
// cannot encode, an option out of range, an unknown kind on a queue the
// client works) fails the whole call with an error naming its index in
// params, from 0, and nothing is enqueued. A call of more than
// store.MaxBatch (10,000) jobs is refused whole rather than split, as
// parts enqueued one after another could not be all or none: a program
// with more jobs makes several calls, each all or none on its own. An
// empty params enqueues nothing and returns no results.
//
// On PostgreSQL, jobs without keys, dedup ids or unique options go in
// one statement, with the wakeup of their queues, in one round trip; a
// batch with any of them takes their locks and inserts its jobs one by
// one in one transaction. On SQLite a call is one transaction.
func (c *Client[TTx]) EnqueueMany(ctx context.Context, params []EnqueueParams) ([]*EnqueueResult, error) {
	return c.enqueueMany(ctx, params, "", func(msgs []store.NewMessage) ([]store.Enqueued, error) { return c.st.Enqueue(ctx, msgs) })
}

// EnqueueManyTx is EnqueueMany inside the caller's transaction tx, as
// EnqueueTx is Enqueue: the jobs become visible when tx commits and
// vanish if it rolls back. A duplicate may name a job that tx enqueued
// itself. On PostgreSQL the locks of the jobs' keys and dedup ids are
// held until tx ends; a database/sql transaction (through the store's
// SQL view) takes its jobs one statement each, a pgx.Tx as EnqueueMany
// does.
func (c *Client[TTx]) EnqueueManyTx(ctx context.Context, tx TTx, params []EnqueueParams) ([]*EnqueueResult, error) {
	return c.enqueueMany(ctx, params, " in a transaction", func(msgs []store.NewMessage) ([]store.Enqueued, error) {
		return c.st.EnqueueTx(ctx, tx, msgs)
	})
}

// enqueueMany prepares the jobs of params, each through the enqueue
// middleware, and gives them to put in one batch; where, when not empty,
// says where put enqueues, for its errors. Each job's middleware hears
// its own result, or the batch's error.
func (c *Client[TTx]) enqueueMany(ctx context.Context, params []EnqueueParams, where string,
	put func([]store.NewMessage) ([]store.Enqueued, error)) ([]*EnqueueResult, error) {
	n := len(params)
	switch {
	case n == 0:
		return []*EnqueueResult{}, nil
	case n > store.MaxBatch:
		return nil, fmt.Errorf("leasehold: enqueue many%s: %d jobs, the limit is %d a call (store.MaxBatch): a call is all or none, so it is not split; make several calls",
			where, n, store.MaxBatch)
	}
	msgs := make([]store.NewMessage, n)
	jobs := make([]*prepared, 0, n)
	fail := func(err error) ([]*EnqueueResult, error) {
		for _, p := range jobs {
			p.finish(nil, err)
		}
		return nil, err
	}
	for i, p := range params {
		job, err := c.prepare(ctx, p.Args, p.Opts, where != "")
		if err != nil {
			return fail(fmt.Errorf("leasehold: job at index %d of %d: %w", i, n, err))
		}
		jobs = append(jobs, job)
		msgs[i] = job.msg
	}
	res, err := put(msgs)
	if err != nil {
		if bad, ok := errors.AsType[*store.BatchError](err); ok && bad.Len == n {
			return fail(fmt.Errorf("leasehold: job at index %d of %d: enqueue a %s job%s: %w", bad.Index, n, msgs[bad.Index].Kind, where, bad.Err))
		}
		if n == 1 && errors.Is(err, store.ErrInvalid) {
			// A batch of one is refused with the reason alone.
			return fail(fmt.Errorf("leasehold: job at index 0 of 1: enqueue a %s job%s: %w", msgs[0].Kind, where, err))
		}
		return fail(fmt.Errorf("leasehold: enqueue %d jobs%s: %w", n, where, err))
	}
	results := make([]EnqueueResult, n)
	out := make([]*EnqueueResult, n)
	for i, r := range res {
		results[i] = EnqueueResult{ID: r.ID, Duplicate: r.Duplicate}
		out[i], _ = jobs[i].finish(&results[i], nil)
	}
	return out, nil
}
