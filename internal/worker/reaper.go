package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/runstate"
	"github.com/leasehold/leasehold/store"
)

// DefaultReapInterval is the reaper's interval when the lease is longer.
const DefaultReapInterval = 10 * time.Second

// ReaperConfig configures a Reaper.
type ReaperConfig struct {
	// Store is reaped. Required.
	Store store.Store
	// LeaseDuration is the lease the workers of the store use, when known.
	// It bounds the interval: a lost lease must not wait long to be taken
	// back. Optional.
	LeaseDuration time.Duration
	// Interval is the time between runs. Default DefaultReapInterval, or
	// half of LeaseDuration when that is shorter. An explicit Interval must
	// be below LeaseDuration.
	Interval time.Duration
	// Clock times the runs. Default: the system clock.
	Clock clock.Clock
	// Logger receives a line per run that recovered messages and per error.
	// Default slog.Default().
	Logger *slog.Logger
	// MeterProvider gets leasehold.reaper.recovered,
	// leasehold.reaper.stale.duration and leasehold.reaper.runs. Default:
	// the global OpenTelemetry provider, a no-op unless one is installed.
	MeterProvider metric.MeterProvider
}

func (c ReaperConfig) resolve() (ReaperConfig, error) {
	if c.Store == nil {
		return c, fmt.Errorf("Reaper: Store is nil")
	}
	c, err := c.resolveTiming()
	if err != nil {
		return c, err
	}
	c.Clock = clock.OrSystem(c.Clock)
	c.Logger = orDefaultLogger(c.Logger)
	return c, nil
}

// resolveTiming fills in and checks the interval.
func (c ReaperConfig) resolveTiming() (ReaperConfig, error) {
	if c.LeaseDuration < 0 || c.Interval < 0 {
		return c, fmt.Errorf("Reaper: LeaseDuration (%s) and Interval (%s) must not be negative", c.LeaseDuration, c.Interval)
	}
	if c.Interval == 0 {
		c.Interval = DefaultReapInterval
		if c.LeaseDuration > 0 && c.LeaseDuration <= c.Interval {
			c.Interval = c.LeaseDuration / 2
		}
		if c.Interval <= 0 {
			return c, fmt.Errorf("Reaper: LeaseDuration %s is too short for a reap interval", c.LeaseDuration)
		}
	} else if c.LeaseDuration > 0 && c.Interval >= c.LeaseDuration {
		return c, fmt.Errorf("Reaper: Interval %s must be below the lease duration %s", c.Interval, c.LeaseDuration)
	}
	return c, nil
}

// Reaper takes back messages whose lease expired: it returns them to
// pending, or dead-letters those whose deliveries are used up. Running
// one in every worker process is safe.
type Reaper struct {
	cfg   ReaperConfig
	m     *reaperMetrics
	hb    *Heartbeat
	state runstate.State
}

// NewReaper returns a reaper.
func NewReaper(cfg ReaperConfig) (*Reaper, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	m, err := newReaperMetrics(cfg.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("worker: reaper metrics: %w", err)
	}
	return &Reaper{cfg: cfg, m: m, hb: NewHeartbeat(cfg.Clock)}, nil
}

// Interval returns the time between runs.
func (r *Reaper) Interval() time.Duration { return r.cfg.Interval }

// Heartbeat beats at every run.
func (r *Reaper) Heartbeat() *Heartbeat { return r.hb }

// RunOnce reaps once and records the run's metrics.
func (r *Reaper) RunOnce(ctx context.Context) ([]store.Recovered, error) {
	rec, err := r.cfg.Store.Reap(ctx)
	r.hb.Beat()
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
	every(ctx, r.cfg.Clock, r.cfg.Interval, stop, func() {
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
