package leasehold

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/leasehold/leasehold/internal/jobmeta"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
)

// Limits of a job's metadata (EnqueueOptions.Metadata), checked once the
// enqueue middleware has run.
const (
	// MaxMetadataKeys is the most keys a job's metadata may have.
	MaxMetadataKeys = jobmeta.MaxKeys
	// MaxMetadataSize is the most bytes a job's metadata may take in its
	// stored form, a JSON object: {"metadata":{"key":"value",...}}.
	MaxMetadataSize = jobmeta.MaxSize
)

// Middleware wraps what a client does with each job: its enqueue and its
// runs. A client's middleware (Config.Middleware) run in order, the first
// outermost: its Enqueue runs first and wraps all the others', and so does
// its Work. Embed MiddlewareDefaults to implement one hook only. Tracing
// (package leaseholdotel) is one use; logging, metrics and tenant checks
// are others.
type Middleware interface {
	// Enqueue wraps the enqueue of one job, by Enqueue, EnqueueTx,
	// EnqueueMany(Tx) (once per job) and the periodic jobs. params holds
	// the job's args and its options resolved: never nil, the kind's
	// defaults applied, the queue named, Metadata a copy the middleware
	// may change (never nil). next runs the rest of the middleware and
	// then the enqueue with params as they are then, under the context
	// given to it (for a batch, the one the last job's middleware gave
	// its next); it returns the enqueue's error, and EnqueuedResult(ctx)
	// gives its result once it returned nil. To refuse the job, return an error without calling
	// next: nothing is enqueued, and the enqueue returns the error,
	// wrapped. An error returned after next returned nil is returned to
	// the caller too, but the job is enqueued (in EnqueueTx, with the
	// caller's transaction). next may be called again after it returned
	// an error (a retry); once it returned nil the job is stored, and a
	// further call returns an error without storing it again.
	Enqueue(ctx context.Context, params *EnqueueParams, next func(context.Context) error) error
	// Work wraps each run of a job's handler: next runs the rest of the
	// middleware and then the handler, under the context given to it (one
	// derived from ctx, say, with a span or a logger), and returns the
	// handler's result. Work returns the result the client acts on, which
	// is normally next's; it may return another (nil to complete a job
	// whose handler failed, say). A panic in the handler reaches Work as
	// an error, so that Work always sees how the run ended; OutcomeOf says
	// what the client makes of a result. ctx ends as the handler's does.
	// job is the job as claimed, its Errors not filled; changes to it
	// change nothing.
	Work(ctx context.Context, job *JobRow, next func(context.Context) error) error
}

// MiddlewareDefaults implements both hooks of Middleware by calling next:
// embed it in a middleware that needs only one.
type MiddlewareDefaults struct{}

// Enqueue calls next.
func (MiddlewareDefaults) Enqueue(ctx context.Context, _ *EnqueueParams, next func(context.Context) error) error {
	return next(ctx)
}

// Work calls next.
func (MiddlewareDefaults) Work(ctx context.Context, _ *JobRow, next func(context.Context) error) error {
	return next(ctx)
}

// EnqueueMiddlewareFunc is a Middleware of its enqueue hook alone: the
// function is its Enqueue, and its Work calls next.
type EnqueueMiddlewareFunc func(ctx context.Context, params *EnqueueParams, next func(context.Context) error) error

// Enqueue calls f.
func (f EnqueueMiddlewareFunc) Enqueue(ctx context.Context, params *EnqueueParams, next func(context.Context) error) error {
	return f(ctx, params, next)
}

// Work calls next.
func (EnqueueMiddlewareFunc) Work(ctx context.Context, _ *JobRow, next func(context.Context) error) error {
	return next(ctx)
}

// WorkMiddlewareFunc is a Middleware of its work hook alone: the function
// is its Work, and its Enqueue calls next.
type WorkMiddlewareFunc func(ctx context.Context, job *JobRow, next func(context.Context) error) error

// Enqueue calls next.
func (WorkMiddlewareFunc) Enqueue(ctx context.Context, _ *EnqueueParams, next func(context.Context) error) error {
	return next(ctx)
}

// Work calls f.
func (f WorkMiddlewareFunc) Work(ctx context.Context, job *JobRow, next func(context.Context) error) error {
	return f(ctx, job, next)
}

// enqueued holds the result of one job's enqueue for the middleware that
// wrap it: the context of the job's middleware chain carries it.
type enqueued struct{ res *EnqueueResult }

type enqueuedKey struct{}

// EnqueuedResult returns the result of the enqueue whose Middleware.Enqueue
// was given ctx (or a context derived from it), once its next returned
// nil; nil before that, after an error, or for any other context.
func EnqueuedResult(ctx context.Context) *EnqueueResult {
	if e, ok := ctx.Value(enqueuedKey{}).(*enqueued); ok {
		return e.res
	}
	return nil
}

// Outcome is what becomes of a job after a run of its handler.
type Outcome string

// The outcomes of a run.
const (
	// OutcomeCompleted: the handler returned nil; the job is completed.
	OutcomeCompleted Outcome = "completed"
	// OutcomeRetried: the handler failed; the job runs again after a
	// backoff delay.
	OutcomeRetried Outcome = "retried"
	// OutcomeDead: the handler failed for good (Permanent), or failed on
	// the job's last delivery; the job is dead-lettered.
	OutcomeDead Outcome = "dead"
	// OutcomeSnoozed: the handler returned Snooze; the job runs again
	// later without using up a delivery.
	OutcomeSnoozed Outcome = "snoozed"
	// OutcomeCancelled: the job was cancelled while the handler ran; it
	// stays cancelled.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeReleased: the run ended without counting against the job:
	// the client stopped it at shutdown, or the handler said the work
	// never began. The job runs again at once, or after a short delay.
	OutcomeReleased Outcome = "released"
	// OutcomeLeaseLost: the job's lease was lost while the handler ran;
	// this run cannot finish the job, which runs again elsewhere.
	OutcomeLeaseLost Outcome = "lease_lost"
)

// OutcomeOf says what the client makes of a run of job that ended with
// err, under the handler's context ctx (or one derived from it), by the
// rules of Handler: the context's cause first (cancelled, lease lost,
// stopped at shutdown, past the maximum processing time), then err. It is
// for Middleware.Work, after next returns. A completion that the store
// then refuses (its lease lost at the last moment) is not foreseen.
func OutcomeOf(ctx context.Context, job *JobRow, err error) Outcome {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, ErrCancelled):
		return OutcomeCancelled
	case errors.Is(cause, store.ErrLeaseLost):
		return OutcomeLeaseLost
	case errors.Is(cause, ErrShutdown) && err != nil:
		return OutcomeReleased
	case errors.Is(cause, ErrMaxProcessingTime) && err == nil:
		// A run past its limit fails, whatever the handler returned.
		err = cause
	}
	var snooze *worker.SnoozeError
	switch {
	case err == nil:
		return OutcomeCompleted
	case errors.As(err, &snooze):
		return OutcomeSnoozed
	case worker.IsNotStarted(err):
		return OutcomeReleased
	case worker.IsPermanent(err) || job.Attempt >= job.MaxDeliveries:
		return OutcomeDead
	}
	return OutcomeRetried
}

// through runs one job's enqueue middleware around inner, which gets the
// job's params as the middleware left them and the context the innermost
// gave its next, and lets EnqueuedResult read
// the job's result from holder. A middleware's own error (not one that
// came out of its next) is its refusal, or its failure after the store
// call when its next stored the job: refused names it, with the
// middleware's index, for every middleware outside and for the caller.
func (c *Client[TTx]) through(ctx context.Context, p *EnqueueParams, holder *enqueued, refused func(mw int, err error) error,
	inner func(context.Context) error) error {
	ctx = context.WithValue(ctx, enqueuedKey{}, holder)
	next := inner
	for i, mw := range slices.Backward(c.cfg.Middleware) {
		rest := next
		next = func(ctx context.Context) error {
			var fromNext error
			err := mw.Enqueue(ctx, p, func(ctx context.Context) error {
				fromNext = rest(ctx)
				return fromNext
			})
			if err != nil && fromNext == nil {
				return refused(i, err)
			}
			return err
		}
	}
	return next(ctx)
}

// resolve returns params with its options resolved as the enqueue
// middleware see them: a copy, the kind's defaults applied, the queue
// named, Metadata a copy, never nil.
func resolve(p EnqueueParams) (EnqueueParams, error) {
	if p.Args == nil {
		return p, errors.New("enqueue: the job args are nil")
	}
	if p.Args.Kind() == "" {
		return p, fmt.Errorf("enqueue: %T has an empty kind", p.Args)
	}
	o := EnqueueOptions{}
	if p.Options != nil {
		o = *p.Options
	}
	if d, ok := p.Args.(JobArgsWithOpts); ok {
		def := d.EnqueueOpts()
		// Delay and RunAt say one thing, when: options that set either
		// take neither from the kind's.
		if o.Delay == 0 && o.RunAt.IsZero() {
			o.Delay, o.RunAt = def.Delay, def.RunAt
		}
		o = EnqueueOptions{Queue: cmp.Or(o.Queue, def.Queue), Key: cmp.Or(o.Key, def.Key), Delay: o.Delay, RunAt: o.RunAt,
			DedupID: cmp.Or(o.DedupID, def.DedupID), MaxDeliveries: cmp.Or(o.MaxDeliveries, def.MaxDeliveries),
			Priority: cmp.Or(o.Priority, def.Priority), Unique: o.Unique, Metadata: o.Metadata}
		if o.Unique.isZero() {
			o.Unique = def.Unique
		}
		if o.Metadata == nil {
			o.Metadata = def.Metadata
		}
	}
	o.Queue = cmp.Or(o.Queue, DefaultQueue)
	o.Metadata = maps.Clone(o.Metadata)
	if o.Metadata == nil {
		o.Metadata = map[string]string{}
	}
	p.Options = &o
	return p, nil
}
