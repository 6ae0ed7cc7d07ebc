package leasehold

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/jobmeta"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/worker"
)

// JobArgs are a job's arguments. Kind names the job's type: it is stored
// with the job and picks the handler that runs it, so it must stay the same
// for as long as jobs of the type may be waiting. Args are stored as the
// client's Codec encodes them, JSON by default.
type JobArgs interface {
	Kind() string
}

// JobArgsWithOpts are job args that carry their kind's default options:
// a field left zero in the options given to Enqueue takes the value of the
// same field here.
type JobArgsWithOpts interface {
	JobArgs
	EnqueueOpts() EnqueueOptions
}

// JobArgsWithWorkOpts are job args whose kind is worked with options of
// its own, such as a longer maximum processing time or another retry
// schedule. The options are read once, from the zero value of the args'
// type, when the kind's handler is added.
type JobArgsWithWorkOpts interface {
	JobArgs
	WorkOpts() WorkOptions
}

// WorkOptions are how the jobs of one kind are worked, where they differ
// from the client's settings. A zero field takes the client's.
type WorkOptions struct {
	// MaxProcessingTime bounds one run of a job of the kind: past it the
	// handler's context is cancelled and the job fails. Any positive
	// time, shorter than the lease too.
	MaxProcessingTime time.Duration
	// RetryDelay gives the delay before a failed job of the kind runs
	// again; attempt counts its deliveries so far, from 1. Default: the
	// client's backoff, 1 s doubling up to 10 minutes, with 20% jitter.
	RetryDelay func(attempt int) time.Duration
}

// Codec turns job args into the bytes stored with a job, and back.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSON is the default Codec: encoding/json.
type JSON struct{}

// Marshal encodes v as JSON.
func (JSON) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes JSON data into v.
func (JSON) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Job is a job as its handler sees it.
type Job[T JobArgs] struct {
	// ID is the job's message id.
	ID int64
	// Args are the job's arguments, decoded.
	Args T
	// Kind is Args' kind.
	Kind string
	// Queue is the queue the job was enqueued on.
	Queue string
	// Key orders jobs: jobs of one queue with the same key run one at a
	// time, in enqueue order. Empty for unordered jobs.
	Key string
	// Attempt counts the deliveries of the job, this one included.
	Attempt int
	// MaxDeliveries is how many deliveries the job gets before it is
	// dead-lettered.
	MaxDeliveries int
	// Priority is the job's priority (see EnqueueOptions).
	Priority int
	// FencingToken is unique to this delivery and larger than any earlier
	// delivery's of the same job. Pass it to systems the handler writes to,
	// so that they can refuse a write from a delivery that lost its lease.
	FencingToken int64
	// EnqueuedAt is when the job was enqueued.
	EnqueuedAt time.Time
	// Metadata is the job's metadata as enqueued (EnqueueOptions.Metadata
	// and what middleware added); nil when it has none. Changes to it are
	// not stored.
	Metadata map[string]string
}

// Handler runs jobs of one kind. Returning nil completes the job; an error
// retries it with backoff until its deliveries are used up, then
// dead-letters it; Permanent(err) dead-letters it at once; Snooze(d) runs it
// again after d without using up a delivery. The context ends when the
// job's lease is lost, its maximum processing time passes or the client
// stops; context.Cause says which (store.ErrLeaseLost,
// ErrMaxProcessingTime, ErrShutdown, ErrCancelled).
type Handler[T JobArgs] func(ctx context.Context, job *Job[T]) error

// Causes of a handler's context ending, besides store.ErrLeaseLost (the
// job's lease was lost: it runs again elsewhere, and this delivery can no
// longer complete it); read them with context.Cause.
var (
	// ErrMaxProcessingTime: the job ran past its maximum processing time.
	// It fails, and is retried or dead-lettered as usual.
	ErrMaxProcessingTime = worker.ErrMaxProcessingTime
	// ErrShutdown: the client is stopping and could wait no longer. The
	// job's lease is released, so that it runs again at once elsewhere.
	ErrShutdown = worker.ErrShutdown
	// ErrCancelled: the job was cancelled (Client.Cancel) while it ran. It
	// stays cancelled: it is not completed, failed or run again.
	ErrCancelled = worker.ErrCancelled
)

// KeepForever, as Config.CompletedRetention or DeadRetention, keeps
// finished jobs until they are deleted by hand.
const KeepForever = maintenance.KeepForever

// Permanent marks err as one that retrying cannot fix: the job is
// dead-lettered at once with it. A nil err stays nil.
func Permanent(err error) error { return worker.Permanent(err) }

// Snooze returns the error a handler returns to run its job again after d,
// without counting the delivery: the job keeps its deliveries and its
// place behind its key.
func Snooze(d time.Duration) error { return worker.Snooze(d) }

// AddHandler registers h for the jobs of T's kind, worked with T's
// WorkOpts when T has them. It panics when that kind already has a handler
// or the client has started: both are programming errors, found at the
// first run.
func AddHandler[T JobArgs, TTx any](c *Client[TTx], h Handler[T]) {
	var zero T
	kind := zero.Kind()
	var opts *WorkOptions
	if w, ok := any(zero).(JobArgsWithWorkOpts); ok {
		o := w.WorkOpts()
		opts = &o
	}
	codec := c.cfg.Codec
	c.addHandler(kind, func(ctx context.Context, m *worker.Message) error {
		job := &Job[T]{ID: m.MessageID, Kind: kind, Queue: m.Queue, Key: m.Key, Attempt: m.Attempt,
			MaxDeliveries: m.MaxDeliveries, Priority: m.Priority, FencingToken: m.FencingToken, EnqueuedAt: m.EnqueuedAt,
			Metadata: jobmeta.Decode(m.Attributes)}
		if err := codec.Unmarshal(m.Payload, &job.Args); err != nil {
			// The same bytes will not decode next time either.
			return Permanent(fmt.Errorf("decode the args of a %s job: %w", kind, err))
		}
		return h(ctx, job)
	}, opts)
}
