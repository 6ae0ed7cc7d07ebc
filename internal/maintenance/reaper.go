package maintenance

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/internal/runstate"
	"github.com/leasehold/leasehold/store"
)

// DefaultReapInterval is a worker's reap interval when its lease is
// longer; with a shorter lease the client reaps every half lease.
const DefaultReapInterval = 10 * time.Second

// ReaperConfig configures a Reaper.
type ReaperConfig struct {
	// Deps: the Store is reaped; the Logger receives a line per run that
	// recovered messages and per error; the Meter makes
	// leasehold.reaper.recovered, leasehold.reaper.stale.duration and
	// leasehold.reaper.runs.
	Deps
	// Interval is the time between the runs of Run: positive. A reaper
	// that only runs once (RunOnce) needs none.
	Interval time.Duration
}

// Reaper takes back messages whose lease expired: it returns them to
// pending, or dead-letters those whose deliveries are used up. Running
// one in every worker process is safe.
type Reaper struct {
	cfg   ReaperConfig
	m     *reaperMetrics
	state runstate.State
}

// NewReaper returns a reaper; it fails only when its instruments cannot
// be made.
func NewReaper(cfg ReaperConfig) (*Reaper, error) {
	b := &Instruments{Meter: cfg.Meter}
	m := &reaperMetrics{
		recovered: b.Counter("leasehold.reaper.recovered", "{message}", "Messages the reaper took back from expired leases."),
		stale:     b.Histogram("leasehold.reaper.stale.duration", "How long recovered messages had been stuck with an expired lease."),
		runs:      b.Counter("leasehold.reaper.runs", "{run}", "Reaper runs."),
	}
	if b.Err != nil {
		return nil, fmt.Errorf("maintenance: reaper metrics: %w", b.Err)
	}
	return &Reaper{cfg: cfg, m: m}, nil
}

// RunOnce reaps once and records the run's metrics.
func (r *Reaper) RunOnce(ctx context.Context) ([]store.Recovered, error) {
	rec, err := r.cfg.Store.Reap(ctx)
	r.m.runs.Add(ctx, 1)
	if err != nil {
		r.cfg.Logger.Error("reaper run failed", "error", err)
		return nil, err
	}
	dead := 0
	for _, m := range rec {
		q := metric.WithAttributes(attribute.String("queue", m.Queue))
		r.m.recovered.Add(ctx, 1, q)
		r.m.stale.Record(ctx, m.StuckFor.Seconds(), q)
		if m.Dead {
			dead++
		}
	}
	if len(rec) > 0 {
		r.cfg.Logger.Info("reaper recovered expired leases", "recovered", len(rec), "dead_lettered", dead)
	}
	return rec, nil
}

// Run reaps every Interval until ctx ends or Shutdown is called. Failed
// runs are logged and retried at the next interval.
func (r *Reaper) Run(ctx context.Context) error {
	ok, err := r.state.Begin()
	if !ok {
		return err
	}
	defer r.state.End()
	r.loop(ctx, r.state.Stopping(), nil)
	return nil
}

// loop reaps every Interval until ctx ends or stop is closed, skipping the
// runs when may, if given, says no.
func (r *Reaper) loop(ctx context.Context, stop <-chan struct{}, may func() bool) {
	Every(ctx, r.cfg.Clock, r.cfg.Interval, stop, func() {
		if may == nil || may() {
			_, _ = r.RunOnce(ctx)
		}
	})
}

// Shutdown stops Run and waits for it, or for ctx to end. Safe before Run,
// more than once and from several goroutines.
func (r *Reaper) Shutdown(ctx context.Context) error { return r.state.Shutdown(ctx) }

// Running reports whether Run is running.
func (r *Reaper) Running() bool { return r.state.Running() }

// reaperMetrics are the reaper's instruments. Recoveries carry the queue
// of the message recovered.
type reaperMetrics struct {
	recovered metric.Int64Counter
	stale     metric.Float64Histogram
	runs      metric.Int64Counter
}
