package leasehold

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/jobmeta"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/lifecycle"
	"github.com/leasehold/leasehold/store"
)

// DefaultQueue is the queue a job goes to when its options name none.
const DefaultQueue = "default"

// Config configures a Client. Every field has a default.
type Config struct {
	// Queues are the queues this client works, with their settings. Empty:
	// the client only enqueues.
	Queues map[string]QueueConfig
	// LeaseDuration is the lease a job is claimed under; the client renews
	// it every third of it while the handler runs. Default 30 s; at least
	// 1 s.
	LeaseDuration time.Duration
	// MaxProcessingTime bounds a handler's run: past it the handler's
	// context is cancelled and the job fails. Default 3 x LeaseDuration;
	// it may be shorter than the lease (a job that must answer within a
	// second), as the lease only bounds how long a dead worker holds it.
	MaxProcessingTime time.Duration
	// HeartbeatInterval is how often the leases of running handlers are
	// renewed, all in one store call. Default a third of LeaseDuration;
	// at most that.
	HeartbeatInterval time.Duration
	// ReapInterval is how often the client's reaper takes back jobs whose
	// lease expired (their worker died). Default 10 s, or half of a
	// shorter LeaseDuration; below LeaseDuration.
	ReapInterval time.Duration
	// CompletedRetention is how long completed jobs are kept after they
	// finish before the client's cleaner deletes them. Default 24 h;
	// KeepForever keeps them. A job is never deleted within the dedup
	// window (5 minutes) of its enqueue, so that its dedup id counts for
	// the whole window; once it is deleted, its dedup id may be used again.
	CompletedRetention time.Duration
	// DeadRetention is how long dead-lettered and cancelled jobs are kept.
	// Default 7 days; KeepForever keeps them.
	DeadRetention time.Duration
	// PeriodicJobs are enqueued on their schedules while the client runs
	// (see NewPeriodicJob).
	PeriodicJobs []*PeriodicJob
	// ShutdownTimeout bounds how long Stop waits for running handlers when
	// its context has no earlier deadline. Default 30 s.
	ShutdownTimeout time.Duration
	// HardStopWait is how long a hard stop waits for cancelled handlers to
	// return before it releases their leases. Default 5 s.
	HardStopWait time.Duration
	// OnStall, when set, is called with the queues whose claim loops have
	// not gone round for 12 minutes (a store call that hangs, say): the
	// client looks once a minute, logs each stalled loop ("loop stalled")
	// and counts it in leasehold.watchdog.stalls, and calls OnStall again
	// at every look while the loops stay stalled. A program that cannot
	// mend that in place should stop, so that its supervisor starts it
	// afresh. OnStall runs on the client's watchdog goroutine, which Stop
	// waits for: it must return promptly, and must not itself call Stop or
	// StopAndCancel, which would wait for it; it may cancel the context
	// that RunUntilSignal runs under (as leasehold work does) or start
	// the stop on another goroutine. Nil: the client does not look.
	OnStall func(queues []string)
	// Codec encodes job args for storage and decodes them for handlers.
	// Default JSON.
	Codec Codec
	// Clock times everything. Default: the system clock.
	Clock clock.Clock
	// Logger receives the client's logs. Default slog.Default().
	Logger *slog.Logger
	// MeterProvider gets the client's metrics. Default: the global
	// OpenTelemetry provider, a no-op unless one is installed.
	MeterProvider metric.MeterProvider
	// Middleware wrap every enqueue and every run of a handler, the first
	// outermost (see Middleware). Default none.
	Middleware []Middleware
	// RejectUnknownKinds, when true or nil (the default), refuses to
	// enqueue a job on a queue this client works whose kind it has no
	// handler for (and no HandleAny), with an *UnknownKindError naming
	// the kind: such a job would fail every delivery here. Set it false
	// when other programs work the same queue with handlers of their
	// own. Queues the client does not work take any kind.
	RejectUnknownKinds *bool
}

// QueueConfig configures one queue a client works.
type QueueConfig struct {
	// Concurrency bounds the jobs of the queue the client runs at once,
	// counting those waiting in a run (see KeyRuns). A job that succeeded
	// gives its slot back before its completion commits; the jobs waiting
	// for their completion are at most as many as the client's slots of
	// every queue, and one batch. Default 10.
	Concurrency int
	// KeyRuns makes each claim of a job with a key bring the next jobs of
	// its key along, up to the queue's free slots in all, as an Amazon SQS
	// FIFO receive takes several messages of one group: a busy key's jobs
	// then cost one claim for several, not one each. They still run one
	// at a time, in enqueue order: each starts once the one before it has
	// completed, been dead-lettered or been cancelled. Until it starts,
	// each waits under a lease of its own, which the client renews with
	// the others, and takes a slot of Concurrency, so that busy keys
	// leave fewer handlers running; its MaxProcessingTime counts from its
	// start. When a job is retried, snoozed or released, or its lease is
	// lost, the rest of its run goes back to the queue without using up
	// a delivery and runs after it again, in order, under new leases: the
	// client never runs them under the leases they were claimed with. A
	// stop gives back at once the jobs of runs that have not started.
	// Default false: a key's jobs are claimed one at a time.
	KeyRuns bool
}

// EnqueueOptions are a job's options. A nil *EnqueueOptions means the
// defaults.
type EnqueueOptions struct {
	// Queue is the job's queue. Default DefaultQueue.
	Queue string
	// Key orders jobs: jobs of one queue with the same key run one at a
	// time, in enqueue order. Empty: unordered.
	Key string
	// Delay keeps the job from running for this long. Not negative.
	Delay time.Duration
	// RunAt keeps the job from running before this time, by the client's
	// Clock: it is turned into a delay from the Clock's now at enqueue,
	// which the store counts from its own now, so a database whose clock
	// is off from the client's runs the job at RunAt by the client's
	// clock all the same. A time that has passed runs the job at once.
	// The zero time: none. Setting both Delay and RunAt is an error.
	RunAt time.Time
	// DedupID makes a second job with the same id on the same queue within
	// the dedup window (5 minutes by default) a duplicate: it is not
	// enqueued, and the result names the first.
	DedupID string
	// MaxDeliveries is how many deliveries the job gets before it is
	// dead-lettered. Default 5.
	MaxDeliveries int
	// Priority orders the jobs of a queue: higher runs first, then the
	// earliest to become visible. -1000 to 1000; default 0. Jobs with a
	// key still run one at a time in enqueue order, whatever their
	// priorities.
	Priority int
	// Unique makes the job unique among equal jobs (see UniqueOpts).
	// Default (nil, or options that select nothing): not unique, unless
	// the kind's options make it so.
	Unique *UniqueOpts
	// Metadata are small facts about the job that are not its args: a
	// trace context, a tenant, who asked for it. They are stored with the
	// job and given to its handler (Job.Metadata, RawJob.Metadata), and
	// the client's middleware may add to them at enqueue. At most
	// MaxMetadataKeys keys and MaxMetadataSize bytes stored; keys are not
	// empty, keys and values are UTF-8. The map is copied, not kept.
	// Default none.
	Metadata map[string]string
}

// EnqueueResult is the outcome of an enqueue.
type EnqueueResult struct {
	// ID is the job's id; for a duplicate, the first job's.
	ID int64
	// Duplicate reports that nothing new was enqueued: a job with the
	// same dedup id was enqueued within the dedup window, or an equal
	// unique job is in one of its states (see UniqueOpts).
	Duplicate bool
}

// Client enqueues jobs and works the queues of its Config: one front door
// to leasehold for a Go program. Its methods are safe for concurrent use.
//
// TTx is the type of the store's transactions (pgx.Tx for store/postgres,
// or *sql.Tx for its SQL() view; *sql.Tx for store/sqlite; store.NoTx for
// store/memory), inferred from the store given to NewClient, so that
// EnqueueTx takes only the right one.
type Client[TTx any] struct {
	st  store.TxStore[TTx]
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	handlers map[string]worker.HandlerFunc
	kinds    map[string]WorkOptions
	// fallback, when set, handles the jobs of every kind without a handler
	// (HandleAny).
	fallback RawHandler
	// run is the started client; nil before Start.
	run *clientRun
}

// clientRun is a started client: its worker, and the loops beside it
// (the periodic enqueuer, the watchdog), which end at Stop or when the
// worker has stopped, whichever comes first.
type clientRun struct {
	w       *worker.Worker
	stopAux context.CancelFunc
	// done is closed once the worker and the loops beside it have
	// stopped; err is then how.
	done chan struct{}
	err  error
}

// NewClient returns a client of st, any store: memory, SQLite or
// PostgreSQL. Bad settings are refused with an error naming each.
func NewClient[TTx any](st store.TxStore[TTx], cfg Config) (*Client[TTx], error) {
	if st == nil {
		return nil, errors.New("leasehold: the store is nil")
	}
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &Client[TTx]{st: st, cfg: cfg, log: cfg.Logger, handlers: map[string]worker.HandlerFunc{}, kinds: map[string]WorkOptions{}}, nil
}

// Validate checks the settings as NewClient does, for a program that
// checks them before it opens a store.
func (cfg Config) Validate() error {
	_, err := cfg.resolve()
	return err
}

// resolve fills in cfg's defaults and checks every setting, once: this is
// the only place where settings are checked, and what it passes on to the
// worker is valid. Each error is one line that names the setting, its
// value and the rule.
func (cfg Config) resolve() (Config, error) {
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, worker.DefaultLeaseDuration)
	cfg.MaxProcessingTime = cmp.Or(cfg.MaxProcessingTime, 3*cfg.LeaseDuration)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, cfg.LeaseDuration/3)
	if cfg.ReapInterval == 0 {
		cfg.ReapInterval = maintenance.DefaultReapInterval
		if cfg.LeaseDuration <= cfg.ReapInterval {
			cfg.ReapInterval = cfg.LeaseDuration / 2
		}
	}
	cfg.CompletedRetention = cmp.Or(cfg.CompletedRetention, maintenance.DefaultCompletedRetention)
	cfg.DeadRetention = cmp.Or(cfg.DeadRetention, maintenance.DefaultDeadRetention)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, worker.DefaultShutdownTimeout)
	cfg.HardStopWait = cmp.Or(cfg.HardStopWait, worker.DefaultHardStopWait)
	cfg.Codec = cmp.Or[Codec](cfg.Codec, JSON{})
	cfg.Clock = clock.OrSystem(cfg.Clock)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.Queues = maps.Clone(cfg.Queues)
	cfg.Middleware = slices.Clone(cfg.Middleware)
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, q := range sortedQueues(cfg) {
		qc := cfg.Queues[q]
		qc.Concurrency = cmp.Or(qc.Concurrency, worker.DefaultConcurrency)
		cfg.Queues[q] = qc
		if err := storecore.CheckQueue(q); err != nil {
			bad("Queues[%q]: %w", q, err)
		}
		if qc.Concurrency < 1 || qc.Concurrency > store.MaxBatch {
			bad("Concurrency of queue %q is %d, must be 1 to %d", q, qc.Concurrency, store.MaxBatch)
		}
	}
	if lease := cfg.LeaseDuration; lease < worker.MinLeaseDuration {
		bad("LeaseDuration is %s, must be at least %s: heartbeats every third of a shorter lease cannot keep it", lease, worker.MinLeaseDuration)
	} else {
		// The lease is good: the settings measured against it can be
		// judged.
		if cfg.MaxProcessingTime < 0 {
			bad("MaxProcessingTime is %s, must be positive", cfg.MaxProcessingTime)
		}
		if hb := cfg.HeartbeatInterval; hb <= 0 || 3*hb > lease {
			bad("HeartbeatInterval %s does not fit LeaseDuration %s: it must be positive and at most a third of the lease (%s), so that a lease sees several renewals before it ends",
				hb, lease, lease/3)
		}
		if r := cfg.ReapInterval; r <= 0 || r >= lease {
			bad("ReapInterval %s does not fit LeaseDuration %s: it must be positive and below the lease, so that a job whose worker died is not left waiting long",
				r, lease)
		}
	}
	if err := (maintenance.Retention{Completed: cfg.CompletedRetention, Dead: cfg.DeadRetention}).Check(); err != nil {
		errs = append(errs, err)
	}
	if cfg.ShutdownTimeout < 0 {
		bad("ShutdownTimeout is %s, must be positive", cfg.ShutdownTimeout)
	}
	if cfg.HardStopWait < 0 {
		bad("HardStopWait is %s, must be positive", cfg.HardStopWait)
	}
	if err := checkPeriodic(cfg.PeriodicJobs, cfg.Clock.Now()); err != nil {
		errs = append(errs, err)
	}
	for i, mw := range cfg.Middleware {
		if mw == nil {
			bad("Middleware[%d] is nil", i)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, fmt.Errorf("leasehold: %w", err)
	}
	return cfg, nil
}

// workerConfig is the configuration of the client's worker: cfg, resolved,
// in the worker's terms.
func (c *Client[TTx]) workerConfig(kinds map[string]worker.KindConfig) worker.Config {
	cfg := c.cfg
	wc := worker.Config{Deps: maintenance.Deps{Store: c.st, Clock: cfg.Clock, Logger: cfg.Logger, Meter: maintenance.Meter(cfg.MeterProvider)},
		Kinds: kinds, Handler: worker.HandlerFunc(c.handle), WorkerID: mailbox.NewWorkerID(),
		LeaseDuration: cfg.LeaseDuration, HeartbeatInterval: cfg.HeartbeatInterval, MaxProcessingTime: cfg.MaxProcessingTime,
		LongPoll: worker.DefaultLongPoll, PollInterval: mailbox.DefaultPollInterval,
		ShutdownTimeout: cfg.ShutdownTimeout, HardStopWait: cfg.HardStopWait, ReapInterval: cfg.ReapInterval,
		Retention: &maintenance.Retention{Completed: cfg.CompletedRetention, Dead: cfg.DeadRetention}}
	for _, q := range sortedQueues(cfg) {
		wc.Queues = append(wc.Queues, worker.QueueConfig{Name: q, Concurrency: cfg.Queues[q].Concurrency, Runs: cfg.Queues[q].KeyRuns})
	}
	return wc
}

func (c *Client[TTx]) addHandler(kind string, h worker.HandlerFunc, opts *WorkOptions) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case kind == "":
		panic("leasehold: AddHandler: the job kind is empty")
	case c.run != nil:
		panic(fmt.Sprintf("leasehold: AddHandler(%q) after Start", kind))
	case c.handlers[kind] != nil:
		panic(fmt.Sprintf("leasehold: AddHandler: kind %q has a handler already", kind))
	}
	c.handlers[kind] = h
	if opts != nil {
		c.kinds[kind] = *opts
	}
}

// UnknownKindError reports a job of a kind that no handler of the client
// knows (AddHandler), on a client without HandleAny.
//
// Enqueue and EnqueueTx refuse such a job, and enqueue nothing, when it
// would go to a queue that the client works (Config.Queues): the client
// would claim it and could not run it, which is a mistake better found at
// the enqueue, as River's client refuses the insert of a kind its workers
// do not know. Add the handlers before enqueueing to the client's own
// queues. A job for a queue the client does not work, or from a client
// that works no queues, is for other programs to run, and goes through.
//
// A job of an unknown kind that a client claims all the same (enqueued
// by another program, or by a newer version of this one during a rolling
// deploy) fails with this error and is retried as any failure is, so that
// a client that knows the kind can take it; once its deliveries are used
// up it is dead-lettered with the error, as River retries such a job and
// then discards it.
type UnknownKindError struct {
	// Kind is the job's kind.
	Kind string
}

func (e *UnknownKindError) Error() string {
	return fmt.Sprintf("no handler for jobs of kind %q", e.Kind)
}

// knows reports whether the client can run jobs of kind: it has their
// handler, or a raw one for every kind.
func (c *Client[TTx]) knows(kind string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handlers[kind] != nil || c.fallback != nil
}

// handle runs a message's job through the client's work middleware, if
// any, to the handler of its kind.
func (c *Client[TTx]) handle(ctx context.Context, m *worker.Message) error {
	if len(c.cfg.Middleware) == 0 {
		return c.dispatch(ctx, m)
	}
	job := &JobRow{ID: m.MessageID, Queue: m.Queue, Kind: m.Kind, Key: m.Key, State: JobStateRunning, Args: m.Payload,
		Metadata: jobmeta.Decode(m.Attributes), Attributes: m.Attributes, Attempt: m.Attempt, MaxDeliveries: m.MaxDeliveries,
		Priority: m.Priority, DedupID: m.DedupID, EnqueuedAt: m.EnqueuedAt, AttemptedAt: m.FirstClaimedAt,
		LeaseExpires: m.LeaseExpires, FencingToken: m.FencingToken, DeadLetterSource: m.DeadLetterSource}
	next := func(ctx context.Context) error {
		return worker.Recover(func() error { return c.dispatch(ctx, m) })
	}
	for _, mw := range slices.Backward(c.cfg.Middleware) {
		inner := next
		next = func(ctx context.Context) error { return mw.Work(ctx, job, inner) }
	}
	return next(ctx)
}

// dispatch runs a message's job with the handler of its kind. A kind
// without a handler fails with an *UnknownKindError, so that it is retried
// and, its deliveries used up, dead-lettered with the reason.
func (c *Client[TTx]) dispatch(ctx context.Context, m *worker.Message) error {
	h := c.handlers[m.Kind]
	switch {
	case h != nil:
		return h(ctx, m)
	case c.fallback != nil:
		return c.handleRaw(ctx, m)
	}
	return &UnknownKindError{Kind: m.Kind}
}

// Enqueue puts a job on its queue. Its args are stored as the Codec
// encodes them, JSON by default.
func (c *Client[TTx]) Enqueue(ctx context.Context, args JobArgs, opts *EnqueueOptions) (*EnqueueResult, error) {
	return one(c.enqueue(ctx, []EnqueueParams{{Args: args, Options: opts}}, "", true, func(ctx context.Context, msgs []store.NewMessage) ([]store.Enqueued, error) {
		return c.st.Enqueue(ctx, msgs)
	}))
}

// EnqueueTx puts a job on its queue inside the caller's transaction tx: the
// job becomes visible when tx commits and vanishes if it rolls back, so a
// program can record its own change and the job that follows from it
// atomically (the transactional outbox). Its result is Enqueue's: the
// job's id, or, for a duplicate, the first job's, which tx sees whether
// that job committed before tx or was enqueued in tx itself. On PostgreSQL
// a job with a key or a dedup id takes a lock on that key or id in tx,
// held until tx ends: keep such transactions short, as they hold back
// every other enqueue of the same key or id. A SQLite transaction holds
// the database's write lock from its first write to its end in any case.
func (c *Client[TTx]) EnqueueTx(ctx context.Context, tx TTx, args JobArgs, opts *EnqueueOptions) (*EnqueueResult, error) {
	return one(c.enqueue(ctx, []EnqueueParams{{Args: args, Options: opts}}, " in a transaction", true, func(ctx context.Context, msgs []store.NewMessage) ([]store.Enqueued, error) {
		return c.st.EnqueueTx(ctx, tx, msgs)
	}))
}

// one returns the only result of a single enqueue.
func one(res []EnqueueResult, err error) (*EnqueueResult, error) {
	if err != nil {
		return nil, err
	}
	return &res[0], nil
}

// message turns a job, its params resolved and through the enqueue
// middleware, into the message that stores it.
func (c *Client[TTx]) message(p EnqueueParams) (store.NewMessage, error) {
	o, kind := p.Options, p.Args.Kind()
	payload, err := c.cfg.Codec.Marshal(p.Args)
	if err != nil {
		return store.NewMessage{}, fmt.Errorf("enqueue a %s job: encode its args: %w", kind, err)
	}
	if _, works := c.cfg.Queues[o.Queue]; works && (c.cfg.RejectUnknownKinds == nil || *c.cfg.RejectUnknownKinds) && !c.knows(kind) {
		return store.NewMessage{}, fmt.Errorf("enqueue on queue %q, which this client works: %w; add its handler before enqueueing",
			o.Queue, &UnknownKindError{Kind: kind})
	}
	delay := o.Delay
	if !o.RunAt.IsZero() {
		if o.Delay != 0 {
			return store.NewMessage{}, fmt.Errorf("enqueue a %s job: both Delay (%s) and RunAt (%s) are set; set one", kind, o.Delay, o.RunAt)
		}
		delay = max(0, o.RunAt.Sub(c.cfg.Clock.Now()))
	}
	msg := store.NewMessage{Queue: o.Queue, Kind: kind, Payload: payload, Key: o.Key, DedupID: o.DedupID,
		Delay: delay, MaxDeliveries: o.MaxDeliveries, Priority: o.Priority}
	if !o.Unique.isZero() {
		if msg.UniqueKey, err = o.Unique.uniqueKey(kind, o.Queue, p.Args, payload, c.cfg.Clock.Now()); err != nil {
			return store.NewMessage{}, fmt.Errorf("enqueue a %s job: %w", kind, err)
		}
		if msg.UniqueStates, err = storeStates(o.Unique.ByState); err != nil {
			return store.NewMessage{}, fmt.Errorf("enqueue a %s job: UniqueOpts.ByState: %w", kind, err)
		}
	}
	if msg.Attributes, err = jobmeta.Encode(o.Metadata); err != nil {
		return store.NewMessage{}, fmt.Errorf("enqueue a %s job: %w", kind, err)
	}
	return msg, nil
}

// Start starts working the client's queues and returns once they run; the
// work goes on in the background until Stop. It logs each queue's
// effective lease, heartbeat and maximum processing time. A client starts
// once.
func (c *Client[TTx]) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run != nil {
		return errors.New("leasehold: the client has started already")
	}
	return c.startLocked(ctx)
}

// startOnce starts the client unless it has started, and returns its run.
func (c *Client[TTx]) startOnce(ctx context.Context) (*clientRun, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run == nil {
		if err := c.startLocked(ctx); err != nil {
			return nil, err
		}
	}
	return c.run, nil
}

// startLocked starts the client; c.mu is held and it has not started.
func (c *Client[TTx]) startLocked(ctx context.Context) error {
	if len(c.cfg.Queues) == 0 {
		return errors.New("leasehold: Start: the client works no queues (Config.Queues is empty); it can only enqueue")
	}
	kinds := map[string]worker.KindConfig{}
	var errs []error
	for _, kind := range slices.Sorted(maps.Keys(c.kinds)) {
		o := c.kinds[kind]
		if o.MaxProcessingTime < 0 {
			errs = append(errs, fmt.Errorf("kind %q: MaxProcessingTime is %s, must be positive", kind, o.MaxProcessingTime))
		}
		kinds[kind] = worker.KindConfig{MaxProcessingTime: o.MaxProcessingTime, RetryDelay: o.RetryDelay}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("leasehold: %w", err)
	}
	var jobs []*scheduled
	if len(c.cfg.PeriodicJobs) > 0 {
		var err error
		if jobs, err = c.scheduleJobs(); err != nil {
			return err
		}
	}
	wc := c.workerConfig(kinds)
	w, err := worker.New(wc)
	if err != nil {
		return fmt.Errorf("leasehold: %w", err)
	}
	wd, err := c.watchdog(wc.Deps, w)
	if err != nil {
		return fmt.Errorf("leasehold: %w", err)
	}
	queues := sortedQueues(c.cfg)
	unobserve, err := maintenance.ObserveQueues(wc.Meter, maintenance.StatsOf(c.st, queues))
	if err != nil {
		return fmt.Errorf("leasehold: metrics: %w", err)
	}
	for _, q := range queues {
		c.log.Info("leasehold: working queue", "queue", q, "concurrency", c.cfg.Queues[q].Concurrency, "key_runs", c.cfg.Queues[q].KeyRuns, "lease", c.cfg.LeaseDuration,
			"heartbeat", c.cfg.HeartbeatInterval, "max_processing_time", c.cfg.MaxProcessingTime)
	}
	for _, kind := range slices.Sorted(maps.Keys(c.kinds)) {
		if o := c.kinds[kind]; o.MaxProcessingTime != 0 {
			c.log.Info("leasehold: kind's own limit", "kind", kind, "max_processing_time", o.MaxProcessingTime)
		}
	}
	// The client's goroutines outlive Start's ctx: Stop ends them.
	ctx = context.WithoutCancel(ctx)
	auxCtx, stopAux := context.WithCancel(ctx)
	r := &clientRun{w: w, stopAux: stopAux, done: make(chan struct{})}
	var aux sync.WaitGroup
	if len(jobs) > 0 {
		aux.Go(func() { c.runPeriodic(auxCtx, jobs) })
	}
	if wd != nil {
		aux.Go(func() { _ = wd.Run(auxCtx) })
	}
	c.run = r
	go func() {
		err := w.Run(ctx)
		stopAux()
		aux.Wait()
		r.err = errors.Join(err, unobserve())
		close(r.done)
	}()
	return nil
}

// stallPrefix names a queue's claim loop in the watchdog's logs.
const stallPrefix = "worker "

// watchdog returns the watchdog of w's claim loops that calls OnStall, or
// nil when there is no OnStall to call.
func (c *Client[TTx]) watchdog(d maintenance.Deps, w *worker.Worker) (*worker.Watchdog, error) {
	if c.cfg.OnStall == nil {
		return nil, nil
	}
	wd, err := worker.NewWatchdog(worker.WatchdogConfig{Deps: d, Interval: worker.DefaultWatchdogInterval, Threshold: worker.DefaultWatchdogThreshold,
		OnStall: func(stalls []worker.Stall) {
			queues := make([]string, len(stalls))
			for i, s := range stalls {
				queues[i] = strings.TrimPrefix(s.Name, stallPrefix)
			}
			c.cfg.OnStall(queues)
		}})
	if err != nil {
		return nil, err
	}
	for q, hb := range w.Heartbeats() {
		wd.Watch(stallPrefix+q, hb)
	}
	return wd, nil
}

// started returns the started client, or nil before Start.
func (c *Client[TTx]) started() *clientRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.run
}

// Stop stops claiming jobs and waits for running handlers to finish, until
// ctx ends or ShutdownTimeout passes; then it stops them at once, as
// StopAndCancel does. It returns once the client has stopped: nil after a
// clean stop. Safe before Start and more than once.
func (c *Client[TTx]) Stop(ctx context.Context) error {
	r := c.started()
	if r == nil {
		return nil
	}
	r.stopAux()
	err := r.w.Shutdown(ctx)
	<-r.done // a hard stop ends within a few seconds
	if err = errors.Join(err, r.err); err != nil {
		return fmt.Errorf("leasehold: stop: %w", err)
	}
	return nil
}

// StopAndCancel stops at once: running handlers' contexts are cancelled
// (context.Cause is ErrShutdown), and the leases of those that have
// not returned a few seconds later are released, so that their jobs run
// again elsewhere at once. It returns once the client has stopped.
func (c *Client[TTx]) StopAndCancel(ctx context.Context) error {
	ended, cancel := context.WithCancel(ctx)
	cancel()
	return c.Stop(ended)
}

// RunUntilSignal starts the client, unless it has started, and works
// until SIGTERM or SIGINT, until ctx ends, or until the client stops by
// itself (its store closed, or Stop called elsewhere). The first signal
// stops it as Stop does, letting running handlers finish within
// ShutdownTimeout; a second signal stops it at once, as StopAndCancel
// does; the end of ctx stops it at once too. The same signal delivered
// twice within lifecycle.DuplicateSignalWindow (to the process and to its
// group, as some supervisors send it) counts once. It returns how the
// client stopped. The signals get their default behaviour back when it
// returns.
func (c *Client[TTx]) RunUntilSignal(ctx context.Context) error {
	co := lifecycle.NewCoordinator()
	co.RepeatWindow, co.Clock = lifecycle.DuplicateSignalWindow, c.cfg.Clock
	unlisten := co.Listen()
	defer unlisten()
	r, err := c.startOnce(ctx)
	if err != nil {
		return err
	}
	select {
	case <-co.Triggered():
		c.log.Info("leasehold: signal: shutting down gracefully; a second signal stops at once")
	case <-ctx.Done():
		return c.StopAndCancel(context.WithoutCancel(ctx))
	case <-r.done:
		return c.Stop(ctx)
	}
	stopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		select {
		case <-co.Escalated():
			c.log.Warn("leasehold: second signal: stopping at once")
			cancel()
		case <-ctx.Done():
			cancel()
		case <-stopCtx.Done():
		}
	}()
	return c.Stop(stopCtx)
}
