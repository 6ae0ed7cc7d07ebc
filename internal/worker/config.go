package worker

import (
	"time"

	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/internal/maintenance"
)

// MinLeaseDuration is the shortest lease a worker can keep. Its lease
// keeper renews leases every third of their duration at most, and a
// renewal is a store round trip: a shorter lease can end before the
// renewal lands, and the message is then delivered again while its
// handler still runs.
const MinLeaseDuration = time.Second

// Defaults, which the client fills in for settings its user leaves out.
const (
	DefaultConcurrency     = 10
	DefaultLeaseDuration   = 30 * time.Second
	DefaultLongPoll        = 5 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultHardStopWait    = 5 * time.Second
)

// Config is a worker's settings. The worker checks none of them and fills
// in no defaults: its caller (the client) has done both, and a setting out
// of range is a programming error that may panic.
type Config struct {
	// Deps are the store the worker claims from, the clock that times
	// everything, the logger (every line carries the worker id, and each
	// line about one queue or one message the queue) and the meter.
	maintenance.Deps
	// Queues are the queues to work, each with a concurrency of its own:
	// they share one lease keeper (one store call per round for every
	// lease held), one completer and one upkeep. At least one.
	Queues []QueueConfig
	// Kinds gives messages of some kinds a maximum processing time or a
	// retry delay of their own; other kinds get the worker's.
	Kinds map[string]KindConfig
	// Handler handles each message.
	Handler Handler
	// WorkerID names the worker in leases, logs and the maintainer
	// election.
	WorkerID string
	// LeaseDuration is the lease a claim starts with, and the lease each
	// of the lease keeper's rounds asks for again. At least
	// MinLeaseDuration.
	LeaseDuration time.Duration
	// HeartbeatInterval is the time between the lease keeper's rounds:
	// positive and at most a third of LeaseDuration, so that a lease sees
	// several renewals before it ends.
	HeartbeatInterval time.Duration
	// MaxProcessingTime bounds a handler's run: past it, the handler's
	// context is cancelled with ErrMaxProcessingTime and the message is
	// failed.
	MaxProcessingTime time.Duration
	// Backoff gives the delay before each retry of a failed message; its
	// zero value is backoff's defaults (1 s doubling up to 10 min, with
	// 20% jitter).
	Backoff backoff.Exponential
	// LongPoll is how long one receive waits for messages.
	LongPoll time.Duration
	// PollInterval is how often a long poll looks again when no wakeup
	// arrives (messages from other processes, delays ending), and how
	// often a loop whose slots are all taken looks again.
	PollInterval time.Duration
	// ShutdownTimeout bounds a drain, however it began: handlers still
	// running then are stopped (a hard stop).
	ShutdownTimeout time.Duration
	// HardStopWait is how long a hard stop waits for cancelled handlers to
	// return before it releases their leases.
	HardStopWait time.Duration
	// ReapInterval is the time between the runs of the worker's reaper;
	// zero: no reaper, for a deployment that runs one elsewhere.
	ReapInterval time.Duration
	// Retention is what the worker's cleaner keeps; nil: no cleaner.
	Retention *maintenance.Retention
}

// QueueConfig is one queue of a worker.
type QueueConfig struct {
	// Name is the queue's name.
	Name string
	// Concurrency bounds the queue's messages running at once, counting
	// those waiting in a run: 1 to store.MaxBatch. Messages whose handler
	// succeeded wait for their completion without a slot (see the package
	// doc).
	Concurrency int
	// Runs claims with runs (see store.Claim): a keyed message comes with
	// the next messages of its key, which wait, each under its lease and
	// in its slot, until the one before them is settled (see the package
	// documentation).
	Runs bool
}

// KindConfig is how messages of one kind are worked, where it differs from
// the worker's settings. A zero field takes the worker's.
type KindConfig struct {
	// MaxProcessingTime bounds a handler's run on a message of the kind.
	MaxProcessingTime time.Duration
	// RetryDelay gives the delay before a failed message of the kind is
	// delivered again; attempt counts the deliveries so far, from 1.
	RetryDelay func(attempt int) time.Duration
}
