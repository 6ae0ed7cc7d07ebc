package leasehold

import (
	"context"
	"errors"
	"fmt"
	"maps"

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
// outermost: its Enqueue runs first and its done last, and its Work wraps
// all the others. Either hook may be nil. Tracing (package leaseholdotel)
// is one use; logging, metrics and tenant checks are others.
type Middleware struct {
	// Enqueue runs before a job is stored, by Enqueue, EnqueueTx and the
	// periodic jobs, once per job. It may add, replace or delete keys of
	// job.Metadata. It may refuse the job by returning an error: nothing
	// is enqueued, and the enqueue returns the error, wrapped. Otherwise
	// it may return done, which is called once with the enqueue's outcome:
	// the job's result, or the error that stopped it (a later middleware's
	// refusal, metadata over its limits, the store's error). done runs on
	// the enqueuing goroutine before the enqueue returns; a done may be
	// nil.
	Enqueue func(ctx context.Context, job *EnqueueJob) (done func(*EnqueueResult, error), err error)
	// Work wraps each run of a job's handler: next runs the rest of the
	// middleware and then the handler, under the context given to it (one
	// derived from ctx, say, with a span or a logger), and returns the
	// handler's result. Work returns the result the client acts on, which
	// is normally next's; it may return another (nil to complete a job
	// whose handler failed, say). A panic in the handler reaches Work as
	// an error, so that Work always sees how the run ended; OutcomeOf says
	// what the client makes of a result. ctx ends as the handler's does.
	Work func(ctx context.Context, job *RawJob, next func(context.Context) error) error
}

// EnqueueJob is a job on its way to the store, as Middleware.Enqueue sees
// it: its options are resolved (the kind's defaults applied, the queue
// named). Only Metadata is the middleware's to change; the other fields
// say what is being enqueued, and changing them changes nothing.
type EnqueueJob struct {
	// Args are the job's arguments.
	Args JobArgs
	// Kind is Args' kind.
	Kind string
	// Queue is the queue the job goes to.
	Queue string
	// Key is the job's key; empty for an unordered job.
	Key string
	// DedupID is the job's dedup id; empty when it has none.
	DedupID string
	// Priority is the job's priority.
	Priority int
	// MaxDeliveries is the job's delivery budget; 0 for the store's
	// default.
	MaxDeliveries int
	// InTx reports an enqueue in the caller's transaction (EnqueueTx): the
	// job exists only if that transaction commits.
	InTx bool
	// Metadata is the job's metadata: a copy of EnqueueOptions.Metadata,
	// never nil, for the middleware to change. What it holds once every
	// middleware has run is stored, within MaxMetadataKeys and
	// MaxMetadataSize.
	Metadata map[string]string
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
func OutcomeOf(ctx context.Context, job *RawJob, err error) Outcome {
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

// checkMiddleware checks the client's middleware: each must have a hook.
func checkMiddleware(mw []Middleware) error {
	for i, m := range mw {
		if m.Enqueue == nil && m.Work == nil {
			return fmt.Errorf("Middleware[%d] has neither Enqueue nor Work", i)
		}
	}
	return nil
}

// prepared is a job ready for the store: its message, and the done hooks
// of the middleware that let it through, innermost first.
type prepared struct {
	msg  store.NewMessage
	done []func(*EnqueueResult, error)
}

// finish tells the middleware the job's outcome, innermost first, and
// returns it.
func (p *prepared) finish(res *EnqueueResult, err error) (*EnqueueResult, error) {
	for _, d := range p.done {
		d(res, err)
	}
	return res, err
}

// prepare turns a job into the message that stores it, through the
// enqueue middleware. It is the one way to the store for every enqueue:
// a batch prepares each of its jobs, stores the messages together and
// finishes each job with its own result, or finishes every prepared job
// with the error when one is refused or the store fails. An error from
// prepare itself has been given to the middleware already.
func (c *Client[TTx]) prepare(ctx context.Context, args JobArgs, opts *EnqueueOptions, inTx bool) (*prepared, error) {
	m, o, err := c.newMessage(args, opts)
	if err != nil {
		return nil, err
	}
	p := &prepared{msg: m}
	job := &EnqueueJob{Args: args, Kind: m.Kind, Queue: m.Queue, Key: m.Key, DedupID: m.DedupID, Priority: m.Priority,
		MaxDeliveries: m.MaxDeliveries, InTx: inTx, Metadata: maps.Clone(o.Metadata)}
	if job.Metadata == nil {
		job.Metadata = map[string]string{}
	}
	for i, mw := range c.cfg.Middleware {
		if mw.Enqueue == nil {
			continue
		}
		done, err := mw.Enqueue(ctx, job)
		if err != nil {
			_, err = p.finish(nil, fmt.Errorf("enqueue a %s job: middleware %d refused it: %w", m.Kind, i, err))
			return nil, err
		}
		if done != nil {
			p.done = append([]func(*EnqueueResult, error){done}, p.done...)
		}
	}
	if p.msg.Attributes, err = jobmeta.Encode(job.Metadata); err != nil {
		_, err = p.finish(nil, fmt.Errorf("enqueue a %s job: %w", m.Kind, err))
		return nil, err
	}
	return p, nil
}
