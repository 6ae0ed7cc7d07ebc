package worker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/runstate"
)

// Watchdog settings the client uses: a check a minute, and a loop silent
// for twelve minutes counts as stalled.
const (
	DefaultWatchdogInterval  = 60 * time.Second
	DefaultWatchdogThreshold = 720 * time.Second
)

// WatchdogConfig configures a Watchdog; nothing in it is checked.
type WatchdogConfig struct {
	// Deps: the Clock times checks (the heartbeats watched must beat on
	// it); the Logger receives an error line per stalled loop; the Meter
	// makes leasehold.watchdog.stalls. The Store is not used.
	maintenance.Deps
	// Interval is the time between checks: positive.
	Interval time.Duration
	// Threshold is how long a loop may stay silent before it counts as
	// stalled: longer than Interval.
	Threshold time.Duration
	// OnStall is called, on the watchdog's goroutine, with the loops found
	// stalled at a check. Optional.
	OnStall func([]Stall)
}

// Stall is a loop the watchdog found silent for too long.
type Stall struct {
	Name   string
	Silent time.Duration
}

// Watchdog watches the heartbeats of loops and reports any that has been
// silent longer than its threshold.
type Watchdog struct {
	cfg    WatchdogConfig
	stalls metric.Int64Counter
	state  runstate.State

	mu      sync.Mutex
	watched map[string]*Heartbeat
	last    []Stall
}

// NewWatchdog returns a watchdog with no loops to watch; it fails only
// when its instrument cannot be made.
func NewWatchdog(cfg WatchdogConfig) (*Watchdog, error) {
	stalls, err := cfg.Meter.Int64Counter("leasehold.watchdog.stalls", metric.WithUnit("{loop}"),
		metric.WithDescription("Loops the watchdog found silent longer than its threshold, per check."))
	if err != nil {
		return nil, fmt.Errorf("worker: watchdog metrics: %w", err)
	}
	return &Watchdog{cfg: cfg, stalls: stalls, watched: make(map[string]*Heartbeat)}, nil
}

// Watch adds a loop's heartbeat under name, replacing any of the same name.
func (w *Watchdog) Watch(name string, hb *Heartbeat) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watched[name] = hb
}

// Check looks at every heartbeat once and reports the stalled loops, by
// name: it logs each, counts them and calls OnStall.
func (w *Watchdog) Check(ctx context.Context) []Stall {
	w.mu.Lock()
	var stalled []Stall
	for name, hb := range w.watched {
		if e := hb.Elapsed(); e > w.cfg.Threshold {
			stalled = append(stalled, Stall{Name: name, Silent: e})
		}
	}
	slices.SortFunc(stalled, func(a, b Stall) int { return cmp.Compare(a.Name, b.Name) })
	w.last = stalled
	w.mu.Unlock()
	for _, s := range stalled {
		w.cfg.Logger.Error("loop stalled", "loop", s.Name, "silent", s.Silent, "threshold", w.cfg.Threshold)
		w.stalls.Add(ctx, 1, metric.WithAttributes(attribute.String("loop", s.Name)))
	}
	if len(stalled) > 0 && w.cfg.OnStall != nil {
		w.cfg.OnStall(stalled)
	}
	return stalled
}

// Stalled returns the loops found stalled at the last check: the liveness
// view.
func (w *Watchdog) Stalled() []Stall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.last)
}

// Live is the liveness check: nil unless loops were found stalled at the
// last check, which the error names.
func (w *Watchdog) Live(context.Context) error {
	stalled := w.Stalled()
	if len(stalled) == 0 {
		return nil
	}
	names := make([]string, len(stalled))
	for i, s := range stalled {
		names[i] = fmt.Sprintf("%s silent for %s", s.Name, s.Silent)
	}
	return fmt.Errorf("stalled: %s", strings.Join(names, ", "))
}

// Run checks every Interval until ctx ends or Shutdown is called.
func (w *Watchdog) Run(ctx context.Context) error {
	ok, err := w.state.Begin()
	if !ok {
		return err
	}
	defer w.state.End()
	maintenance.Every(ctx, w.cfg.Clock, w.cfg.Interval, w.state.Stopping(), func() { w.Check(ctx) })
	return nil
}

// Shutdown stops Run and waits for it, or for ctx to end. Safe before Run,
// more than once and from several goroutines.
func (w *Watchdog) Shutdown(ctx context.Context) error { return w.state.Shutdown(ctx) }

// Running reports whether Run is running.
func (w *Watchdog) Running() bool { return w.state.Running() }
