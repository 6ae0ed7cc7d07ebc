// Package maintenance is a database's upkeep: the reaper, which gives back
// the messages whose lease ended (their worker died), the cleaner, which
// deletes finished messages past their retention, and the election of the
// one process at a time that maintains the database (the maintainer
// lease). A worker runs one beside its claim loops; a server whose
// clients receive through it runs one alone. It also holds what the
// runtime shares: its dependencies (Deps), its meter and a ticking loop.
package maintenance

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/runstate"
	"github.com/leasehold/leasehold/store"
)

// Config configures a Maintenance. Nothing in it is checked or defaulted:
// its caller has done both.
type Config struct {
	// Deps: the Store is maintained; the Logger and the Meter serve the
	// reaper, the cleaner and the election.
	Deps
	// ID names this process in the maintainer election; the election's
	// log lines carry it as maintainer_id.
	ID string
	// LeaseDuration is how long one holding of the maintainer lease lasts
	// unless renewed; it is renewed every third of it.
	LeaseDuration time.Duration
	// ReapInterval is the time between the reaper's runs; zero: no
	// reaper.
	ReapInterval time.Duration
	// AlwaysReap runs the reaper at every interval whether or not this
	// process maintains the database, so that leases that ended come back
	// within ReapInterval (the reaper is safe to run everywhere): for a
	// server whose clients receive through it. Otherwise the reaper, like
	// the cleaner, runs only while this process holds the maintainer
	// lease.
	AlwaysReap bool
	// Retention is what the cleaner keeps; nil: no cleaner.
	Retention *Retention
}

// ThroughputKept is how long the maintainer keeps the store's
// per-minute throughput (see store.Store.Throughput): the store's window
// and an hour more, so that a chart of the window always has its oldest
// minute.
const ThroughputKept = store.ThroughputWindow + time.Hour

// Maintenance is a process's part in a database's upkeep: it stands in
// the maintainer election, and runs the reaper and the cleaner as Config
// says. While it maintains the database, it also deletes the throughput
// minutes past ThroughputKept, every CleanInterval, whatever the
// retention.
type Maintenance struct {
	deps       Deps
	maint      *maintainer
	reaper     *Reaper
	cleaner    *Cleaner
	alwaysReap bool
	state      runstate.State
}

// New returns the upkeep of cfg.Store; it fails only when its
// instruments cannot be made.
func New(cfg Config) (*Maintenance, error) {
	m := &Maintenance{deps: cfg.Deps, alwaysReap: cfg.AlwaysReap}
	var err error
	if cfg.ReapInterval > 0 {
		if m.reaper, err = NewReaper(ReaperConfig{Deps: cfg.Deps, Interval: cfg.ReapInterval}); err != nil {
			return nil, err
		}
	}
	if cfg.Retention != nil {
		if m.cleaner, err = NewCleaner(CleanerConfig{Deps: cfg.Deps, Retention: *cfg.Retention}); err != nil {
			return nil, err
		}
	}
	m.maint, err = newMaintainer(cfg.Store, cfg.ID, cfg.LeaseDuration, cfg.Clock, cfg.Logger.With("maintainer_id", cfg.ID), cfg.Meter)
	if err != nil {
		return nil, fmt.Errorf("maintenance: metrics: %w", err)
	}
	return m, nil
}

// Maintaining reports whether this process holds the maintainer lease
// now, so that its cleaner runs (and its reaper, unless AlwaysReap).
func (m *Maintenance) Maintaining() bool { return m.maint.holding() }

// Run runs the upkeep until Shutdown is called or ctx ends; then it gives
// up the maintainer lease, if it holds it.
func (m *Maintenance) Run(ctx context.Context) error {
	ok, err := m.state.Begin()
	if !ok {
		return err
	}
	defer m.state.End()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var loops sync.WaitGroup
	loops.Go(func() { m.maint.run(ctx) })
	if m.reaper != nil {
		may := m.maint.holding
		if m.alwaysReap {
			may = nil
		}
		loops.Go(func() { m.reaper.loop(ctx, nil, may) })
	}
	if m.cleaner != nil {
		loops.Go(func() { m.cleaner.loop(ctx, m.maint.holding) })
	}
	loops.Go(func() {
		Every(ctx, m.deps.Clock, CleanInterval, nil, func() {
			if m.maint.holding() {
				m.pruneThroughput(ctx)
			}
		})
	})
	select {
	case <-ctx.Done():
	case <-m.state.Stopping():
	}
	cancel()
	loops.Wait()
	return nil
}

// Shutdown stops Run and waits for it, or for ctx to end.
func (m *Maintenance) Shutdown(ctx context.Context) error { return m.state.Shutdown(ctx) }

// Running reports whether Run is running.
func (m *Maintenance) Running() bool { return m.state.Running() }

// pruneThroughput deletes the throughput minutes past ThroughputKept.
func (m *Maintenance) pruneThroughput(ctx context.Context) {
	if _, err := m.deps.Store.PruneThroughput(ctx, ThroughputKept); err != nil && ctx.Err() == nil {
		m.deps.Logger.Warn("could not delete the throughput minutes past their time", "error", err)
	}
}
