package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/maintenance"
)

// Worker claims messages of its queues and runs a handler on each, under a
// lease that its lease keeper keeps alive; see the package documentation
// for its rules.
type Worker struct {
	cfg    Config
	queues []*queue
	// concurrency is the sum of the queues' concurrencies.
	concurrency int
	keeper      *keeper
	// maint is the worker's part in the database's upkeep: its reaper and
	// cleaner run while it holds the maintainer lease. Nil when both are
	// off.
	maint *maintenance.Maintenance
	log   *slog.Logger
	m     *workerMetrics
	phase phases
}

// queue is what a worker keeps of one of its queues between runs.
type queue struct {
	name        string
	concurrency int
	runs        bool
	mb          *mailbox.Mailbox
	hb          *Heartbeat
	log         *slog.Logger
	attrs       *queueAttrs
	// keeperName names the queue in the keeper's logs: empty when the
	// worker's logger names it already (a worker of one queue).
	keeperName string
}

// New returns a worker for cfg, which must be valid (see Config). It
// fails only when the worker's instruments cannot be made.
func New(cfg Config) (*Worker, error) {
	m, err := newWorkerMetrics(cfg.Meter)
	if err != nil {
		return nil, fmt.Errorf("worker: metrics: %w", err)
	}
	log := cfg.Logger.With("worker_id", cfg.WorkerID)
	if len(cfg.Queues) == 1 {
		log = log.With("queue", cfg.Queues[0].Name)
	}
	w := &Worker{cfg: cfg, log: log, m: m}
	w.phase.init(cfg.Clock, cfg.ShutdownTimeout)
	for _, qc := range cfg.Queues {
		w.concurrency += qc.Concurrency
		mb := mailbox.New(mailbox.Config{Store: cfg.Store, Queue: qc.Name, WorkerID: cfg.WorkerID, PollInterval: cfg.PollInterval, Clock: cfg.Clock})
		qlog, keeperName := log, ""
		if len(cfg.Queues) > 1 {
			qlog, keeperName = log.With("queue", qc.Name), qc.Name
		}
		w.queues = append(w.queues, &queue{name: qc.Name, concurrency: qc.Concurrency, runs: qc.Runs, mb: mb, hb: NewHeartbeat(cfg.Clock),
			log: qlog, attrs: newQueueAttrs(qc.Name), keeperName: keeperName})
	}
	w.keeper = newKeeper(cfg.Store, cfg.Clock, cfg.HeartbeatInterval, cfg.LeaseDuration, log, m)
	if cfg.ReapInterval > 0 || cfg.Retention != nil {
		d := cfg.Deps
		d.Logger = log
		w.maint, err = maintenance.New(maintenance.Config{Deps: d, ID: cfg.WorkerID, LeaseDuration: cfg.LeaseDuration,
			ReapInterval: cfg.ReapInterval, Retention: cfg.Retention})
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
	}
	return w, nil
}

// Heartbeats are the heartbeats of the worker's claim loops, by queue: each
// beats whenever its loop goes round, at least every PollInterval while it
// runs.
func (w *Worker) Heartbeats() map[string]*Heartbeat {
	hbs := make(map[string]*Heartbeat, len(w.queues))
	for _, q := range w.queues {
		hbs[q.name] = q.hb
	}
	return hbs
}

// Running reports whether Run is running.
func (w *Worker) Running() bool { return w.phase.inRun.Load() }

// Draining reports whether the worker has stopped claiming: Shutdown was
// called, or Run is ending.
func (w *Worker) Draining() bool { return w.phase.current() >= draining }

// Ready reports whether the worker should be given work: nil unless it is
// draining or its store cannot be reached.
func (w *Worker) Ready(ctx context.Context) error {
	if w.Draining() {
		return errors.New("worker is draining")
	}
	if err := w.cfg.Store.Ping(ctx); err != nil {
		return fmt.Errorf("store unreachable: %w", err)
	}
	return nil
}

// Run claims and handles messages until Shutdown is called, ctx ends, or
// a claim loop ends (the store closed); when one queue's claim loop ends,
// all do. It returns nil after a clean stop.
//
// A graceful stop claims nothing more, releases at once and without
// counting a delivery any message received but not started, and waits for
// running handlers, for ShutdownTimeout at most, while the lease keeper
// keeps their leases alive. The end of ctx, of Shutdown's context or of
// ShutdownTimeout is a hard stop: running handlers' contexts are cancelled
// with cause ErrShutdown, and after HardStopWait the leases of those that
// have not returned are released so that another worker can take the
// messages at once; Run then returns an error wrapping ErrShutdown. The
// lease keeper and the upkeep stop last.
//
// Run may be called once; Shutdown before Run makes it return nil at once.
func (w *Worker) Run(ctx context.Context) error {
	ok, err := w.phase.begin(ctx)
	if !ok {
		return err
	}
	handlersStopped := false
	defer func() { w.phase.end(handlersStopped) }()

	// The handlers, the lease keeper and the upkeep outlive ctx long
	// enough to settle every lease: their contexts are of base, which ctx's
	// end does not reach. Handlers' contexts are not children of a
	// cancellable parent (a hard stop cancels each) because a shared
	// parent costs a map insert and delete per message; the keeper and the
	// upkeep share bg, which ends when Run returns.
	base := context.WithoutCancel(ctx)
	bgCtx, stopBg := context.WithCancel(base)
	var bg sync.WaitGroup
	bg.Go(func() { w.keeper.run(bgCtx) })
	if w.maint != nil {
		bg.Go(func() { _ = w.maint.Run(bgCtx) })
	}
	defer func() {
		stopBg()
		bg.Wait()
	}()

	r := newRun(w, ctx, base)
	defer r.close()
	results := make([]loopResult, len(w.queues))
	var loops sync.WaitGroup
	for i, q := range w.queues {
		l := newLoop(r, q)
		loops.Go(func() { results[i] = l.run() })
	}
	loops.Wait()
	var errs []error
	abandoned := 0
	for _, res := range results {
		errs = append(errs, res.err)
		abandoned += res.abandoned
		handlersStopped = handlersStopped || res.hard
	}
	if abandoned > 0 {
		errs = append(errs, fmt.Errorf("worker: %d %w", abandoned, ErrAbandoned))
	}
	if handlersStopped {
		errs = append(errs, fmt.Errorf("worker: hard stop: %w", ErrShutdown))
	}
	w.log.Info("worker stopped")
	return errors.Join(errs...)
}

// Shutdown stops the worker gracefully and waits for Run to return: it
// claims nothing more and lets running handlers finish, for up to
// ShutdownTimeout or until ctx ends, whichever comes first, before a hard
// stop (see Run); Shutdown keeps to ctx, not to the hard stop. It returns nil when everything in flight finished, and an
// error otherwise. Safe before Run, more than once and from several
// goroutines.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.phase.advance(draining)
	ran := w.phase.reached(done)
	select {
	case <-ran:
	default:
		select {
		case <-ran:
		case <-ctx.Done():
			// A hard stop: Run goes on to release the leases of what has
			// not finished, within HardStopWait and its store calls'
			// timeouts; Shutdown keeps to ctx.
			w.phase.advance(hardStop)
			return fmt.Errorf("worker: shutdown: %w", context.Cause(ctx))
		}
	}
	if w.phase.handlersStopped {
		return fmt.Errorf("worker: shutdown: handlers still running after the shutdown timeout were stopped: %w", ErrShutdown)
	}
	return nil
}

// Stop is a hard stop: running handlers are cancelled at once with cause
// ErrShutdown. It waits for Run to return, and is safe before Run.
func (w *Worker) Stop() {
	w.phase.advance(hardStop)
	<-w.phase.reached(done)
}

// hardStopContext bounds a store call made while the worker stops: a
// stop must not wait on a database that does not answer.
func (w *Worker) hardStopContext() (context.Context, context.CancelFunc) {
	return clock.WithTimeout(context.Background(), w.cfg.Clock, w.cfg.HardStopWait)
}
