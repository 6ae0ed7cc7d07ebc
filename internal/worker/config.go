package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/backoff"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// MinLeaseDuration is the shortest lease a Worker takes. Its lease keeper
// renews leases every third of their duration at most, and a renewal is a
// store round trip: a shorter lease can end before the renewal lands, and
// the message is then delivered again while its handler still runs.
const MinLeaseDuration = time.Second

// Defaults.
const (
	DefaultConcurrency     = 10
	DefaultLeaseDuration   = 30 * time.Second
	DefaultLongPoll        = 5 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultHardStopWait    = 5 * time.Second
)

// Config configures a Worker. Store, Handler and either Queue or Queues are
// required; every other field has a default.
type Config struct {
	// Store holds the messages. Required.
	Store store.Store
	// Queue is the queue to work, for a worker of one queue, with
	// Concurrency handlers. Either Queue or Queues.
	Queue string
	// Queues are the queues to work, each with a concurrency of its own,
	// for a worker of several: they share one lease keeper (one store call
	// per tick for every lease held), one completer and one reaper. Either
	// Queue or Queues.
	Queues []QueueConfig
	// Kinds gives messages of some kinds a maximum processing time or a
	// retry delay of their own; other kinds get the worker's.
	Kinds map[string]KindConfig
	// Handler handles each message. Required.
	Handler Handler
	// WorkerID names the worker in leases, logs and metrics. Default:
	// mailbox.NewWorkerID() (host, pid and a random suffix).
	WorkerID string
	// Concurrency bounds the handlers of Queue running at once; the worker
	// claims only as many messages as it has free slots. Default
	// DefaultConcurrency; at most store.MaxBatch. With Queues, each
	// queue's own.
	Concurrency int
	// LeaseDuration is the lease a claim starts with. Default
	// DefaultLeaseDuration.
	LeaseDuration time.Duration
	// LeaseExtender configures the lease keeper. Nil: enabled, extending to
	// LeaseDuration every LeaseDuration/3. Set Enabled: false to turn
	// extension off.
	LeaseExtender *LeaseExtenderConfig
	// MaxProcessingTime bounds a handler's run: past it, the handler's
	// context is cancelled with ErrMaxProcessingTime and the message is
	// failed. Default 3 x LeaseDuration.
	MaxProcessingTime time.Duration
	// Backoff gives the delay before each retry of a failed message.
	// Default: backoff.Exponential's defaults (1 s doubling to 10 min, 20%
	// jitter).
	Backoff backoff.Exponential
	// LongPoll is how long one receive waits for messages. Default
	// DefaultLongPoll.
	LongPoll time.Duration
	// PollInterval is how often a long poll looks again when no wakeup
	// arrives (messages from other processes, delays ending), and how often
	// a saturated or full worker looks again. Default
	// mailbox.DefaultPollInterval.
	PollInterval time.Duration
	// Saturated, when set, is asked before each receive; while it returns
	// true the worker claims nothing (backpressure from downstream).
	Saturated func(ctx context.Context) bool
	// MaxIterations stops the worker, gracefully, after this many receives.
	// Zero: no limit.
	MaxIterations int
	// ShutdownTimeout bounds the drain of a graceful Shutdown: handlers
	// still running then are stopped. Default DefaultShutdownTimeout. With
	// the lease extender disabled it must not exceed LeaseDuration.
	ShutdownTimeout time.Duration
	// HardStopWait is how long a hard stop waits for cancelled handlers to
	// return before it releases their leases. Default DefaultHardStopWait.
	HardStopWait time.Duration
	// ReapInterval is the interval of the worker's reaper. Default
	// maintenance.DefaultReapInterval, or half of LeaseDuration when that
	// is shorter; it must be below LeaseDuration.
	ReapInterval time.Duration
	// DisableReaper turns the worker's reaper off, for a deployment that
	// runs a reaper elsewhere.
	DisableReaper bool
	// CompletedRetention and DeadRetention are the retentions of the
	// worker's cleaner (see maintenance.CleanerConfig): defaults
	// maintenance.DefaultCompletedRetention and DefaultDeadRetention;
	// maintenance.KeepForever keeps the messages.
	CompletedRetention, DeadRetention time.Duration
	// DisableCleaner turns the worker's cleaner off, for a deployment that
	// runs a cleaner elsewhere or keeps every message.
	DisableCleaner bool
	// Clock times everything. Default: the system clock.
	Clock clock.Clock
	// Logger receives the worker's logs; every line carries the worker id,
	// and each line about one queue or one message the queue. Default
	// slog.Default().
	Logger *slog.Logger
	// MeterProvider gets the worker's metrics. Default: the global
	// OpenTelemetry provider, a no-op unless one is installed.
	MeterProvider metric.MeterProvider
}

// QueueConfig is one queue of a worker that works several.
type QueueConfig struct {
	// Name is the queue's name. Required.
	Name string
	// Concurrency bounds the queue's handlers running at once. Default
	// DefaultConcurrency; at most store.MaxBatch.
	Concurrency int
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

// resolved is a validated Config with its defaults filled in.
type resolved struct {
	Config
	extender LeaseExtenderConfig
	queues   []QueueConfig
	// concurrency is the sum of the queues' concurrencies.
	concurrency int
}

// Validate checks every setting as New does, except that Store and Handler
// may still be nil: for programs that check their settings before they
// open a store.
func (c Config) Validate() error {
	_, err := c.resolve(false)
	return err
}

func (c Config) resolve(needDeps bool) (resolved, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Store == nil && needDeps {
		bad("Store is nil")
	}
	var r resolved
	switch {
	case len(c.Queues) == 0:
		r.queues = []QueueConfig{{Name: c.Queue, Concurrency: c.Concurrency}}
	case c.Queue != "" || c.Concurrency != 0:
		bad("Queue (%q) and Concurrency (%d) are set beside Queues: set either Queue or Queues", c.Queue, c.Concurrency)
	default:
		r.queues = slices.Clone(c.Queues)
	}
	seen := make(map[string]bool, len(r.queues))
	for i := range r.queues {
		q := &r.queues[i]
		field, conc := "Queue", "Concurrency"
		if len(c.Queues) > 0 {
			field = fmt.Sprintf("Queues[%d]", i)
			conc = fmt.Sprintf("Concurrency of queue %q", q.Name)
		}
		if err := storecore.CheckQueue(q.Name); err != nil {
			bad("%s: %w", field, err)
		} else if seen[q.Name] {
			bad("%s: queue %q is listed twice", field, q.Name)
		}
		seen[q.Name] = true
		if q.Concurrency == 0 {
			q.Concurrency = DefaultConcurrency
		}
		if q.Concurrency < 1 || q.Concurrency > store.MaxBatch {
			bad("%s is %d, must be 1 to %d", conc, q.Concurrency, store.MaxBatch)
		}
		r.concurrency += q.Concurrency
	}
	for kind, k := range c.Kinds {
		if k.MaxProcessingTime < 0 {
			bad("Kinds[%q]: MaxProcessingTime is %s, must be positive", kind, k.MaxProcessingTime)
		}
	}
	if c.Handler == nil && needDeps {
		bad("Handler is nil")
	}
	if c.WorkerID == "" {
		c.WorkerID = mailbox.NewWorkerID()
	}
	if err := storecore.CheckWorkerID(c.WorkerID); err != nil {
		bad("WorkerID: %w", err)
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if err := storecore.CheckLease(c.LeaseDuration); err != nil {
		bad("LeaseDuration: %w", err)
	} else if c.LeaseDuration < MinLeaseDuration {
		bad("LeaseDuration is %s, must be at least %s: heartbeats every third of a shorter lease cannot keep it", c.LeaseDuration, MinLeaseDuration)
	}
	if c.LeaseExtender == nil {
		r.extender = LeaseExtenderConfig{Enabled: true}
	} else {
		r.extender = *c.LeaseExtender
	}
	ext, err := r.extender.resolve(c.LeaseDuration)
	if err != nil {
		bad("%w", err)
	}
	r.extender = ext
	if c.MaxProcessingTime == 0 {
		c.MaxProcessingTime = 3 * c.LeaseDuration
	}
	if c.MaxProcessingTime < 0 {
		bad("MaxProcessingTime is %s, must be positive", c.MaxProcessingTime)
	}
	c.Backoff = c.Backoff.Defaults()
	if err := c.Backoff.Validate(); err != nil {
		bad("Backoff: %w", err)
	}
	if c.LongPoll == 0 {
		c.LongPoll = DefaultLongPoll
	}
	if c.PollInterval == 0 {
		c.PollInterval = mailbox.DefaultPollInterval
	}
	if c.LongPoll < 0 || c.PollInterval < 0 {
		bad("LongPoll (%s) and PollInterval (%s) must not be negative", c.LongPoll, c.PollInterval)
	}
	if c.MaxIterations < 0 {
		bad("MaxIterations is %d, must not be negative", c.MaxIterations)
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
		if !r.extender.Enabled {
			c.ShutdownTimeout = min(c.ShutdownTimeout, c.LeaseDuration)
		}
	}
	if c.ShutdownTimeout < 0 {
		bad("ShutdownTimeout is %s, must be positive", c.ShutdownTimeout)
	}
	if !r.extender.Enabled && c.ShutdownTimeout > c.LeaseDuration {
		bad("ShutdownTimeout %s exceeds LeaseDuration %s with the lease extender disabled: leases would expire during the drain", c.ShutdownTimeout, c.LeaseDuration)
	}
	if c.HardStopWait == 0 {
		c.HardStopWait = DefaultHardStopWait
	}
	if c.HardStopWait < 0 {
		bad("HardStopWait is %s, must be positive", c.HardStopWait)
	}
	if !c.DisableReaper {
		var err error
		c.ReapInterval, err = maintenance.ReaperConfig{LeaseDuration: c.LeaseDuration, Interval: c.ReapInterval}.ResolveInterval()
		if err != nil {
			bad("ReapInterval: %w", err)
		}
	}
	if !c.DisableCleaner {
		if err := (maintenance.CleanerConfig{CompletedRetention: c.CompletedRetention, DeadRetention: c.DeadRetention}).Check(); err != nil {
			bad("%w", err)
		}
	}
	c.Clock = clock.OrSystem(c.Clock)
	c.Logger = orDefaultLogger(c.Logger)
	r.Config = c
	if err := errors.Join(errs...); err != nil {
		return r, fmt.Errorf("worker: %w", err)
	}
	return r, nil
}

func orDefaultLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}
