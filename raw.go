package leasehold

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/internal/jobmeta"
	"github.com/leasehold/leasehold/internal/worker"
)

// RawJob is a job of any kind as it is stored: its args are the bytes of
// Payload, not decoded. HandleAny's handler gets one per run, for a
// program that does not know the jobs' types: one that hands them to a
// process in another language, say.
type RawJob struct {
	// ID is the job's message id.
	ID int64
	// Kind is the job's kind; empty for a job enqueued without one (by
	// leasehold enqueue, or through the SQS API).
	Kind string
	// Queue is the queue the job was enqueued on.
	Queue string
	// Key orders jobs: jobs of one queue with the same key run one at a
	// time, in enqueue order. Empty for unordered jobs.
	Key string
	// Payload is the job's args as stored: as the enqueuing client's
	// Codec encoded them, or the message body as sent by other means. It
	// must not be modified.
	Payload []byte
	// Attempt counts the deliveries of the job, this one included.
	Attempt int
	// MaxDeliveries is how many deliveries the job gets before it is
	// dead-lettered.
	MaxDeliveries int
	// Priority is the job's priority (see EnqueueOptions).
	Priority int
	// FencingToken is unique to this delivery and larger than any earlier
	// delivery's of the same job (see Job).
	FencingToken int64
	// EnqueuedAt is when the job was enqueued.
	EnqueuedAt time.Time
	// ReplyTo is the queue that the job's reply goes to (see SetReply);
	// empty when the job asks for none. A job gets one when it is enqueued
	// as a request (leasehold enqueue --reply-to).
	ReplyTo string
	// Metadata is the job's metadata as enqueued (EnqueueOptions.Metadata
	// and what middleware added); nil when it has none, as for a job sent
	// by other means. Changes to it are not stored.
	Metadata map[string]string

	msg *worker.Message
}

// SetReply sets the output of the job's reply. When the handler returns
// nil, a reply that carries it goes to the ReplyTo queue in the same
// transaction as the job's completion: a JSON object with the request's
// id, request_id, and the output, base64 in output. Output larger than
// three quarters of the store's payload limit (786,396 bytes with the
// default limit) cannot be sent: the job then fails for good, and the
// reply carries the error instead. A job without ReplyTo sends no reply,
// and SetReply does nothing; nor does it when the handler fails, as the
// reply of a job that fails for good carries the error.
func (j *RawJob) SetReply(output []byte) { j.msg.SetReply(output) }

// RawHandler runs jobs as they are stored. Its results are a Handler's:
// nil completes the job; an error retries it with backoff until its
// deliveries are used up, then dead-letters it; Permanent(err)
// dead-letters it at once; Snooze(d) runs it again after d without using
// up a delivery. Its context ends as a Handler's does.
type RawHandler func(ctx context.Context, job *RawJob) error

// HandleAny makes h run the jobs of every kind that has no handler of its
// own (AddHandler), whatever their payload. Without it such a job fails
// with "no handler for jobs of kind ...", is retried (a newer version of
// the program may know the kind), and is dead-lettered once its
// deliveries are used up. It panics when the client has a raw handler
// already or has started: both are programming errors, found at the first
// run.
func (c *Client[TTx]) HandleAny(h RawHandler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.run != nil:
		panic("leasehold: HandleAny after Start")
	case c.fallback != nil:
		panic("leasehold: HandleAny: the client has a raw handler already")
	}
	c.fallback = h
}

// handleRaw runs m with the client's raw handler.
func (c *Client[TTx]) handleRaw(ctx context.Context, m *worker.Message) error {
	return c.fallback(ctx, rawJob(m))
}

// rawJob returns m's job as stored.
func rawJob(m *worker.Message) *RawJob {
	return &RawJob{ID: m.MessageID, Kind: m.Kind, Queue: m.Queue, Key: m.Key, Payload: m.Payload, Attempt: m.Attempt,
		MaxDeliveries: m.MaxDeliveries, Priority: m.Priority, FencingToken: m.FencingToken, EnqueuedAt: m.EnqueuedAt,
		ReplyTo: m.ReplyTo, Metadata: jobmeta.Decode(m.Attributes), msg: m}
}
