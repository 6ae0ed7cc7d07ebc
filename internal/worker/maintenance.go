package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/runstate"
	"github.com/leasehold/leasehold/store"
)

// MaintenanceConfig configures a Maintenance.
type MaintenanceConfig struct {
	// Store is maintained. Required.
	Store store.Store
	// ID names this process in the maintainer election. Default: a new
	// worker id.
	ID string
	// LeaseDuration is how long one holding of the maintainer lease lasts
	// unless renewed; it is renewed every third of it. Default
	// DefaultLeaseDuration.
	LeaseDuration time.Duration
	// ReapInterval is the time between the reaper's runs. Default
	// DefaultReapInterval.
	ReapInterval time.Duration
	// CompletedRetention and DeadRetention are the cleaner's (see
	// CleanerConfig).
	CompletedRetention, DeadRetention time.Duration
	// Clock times everything. Default: the system clock.
	Clock clock.Clock
	// Logger receives the maintenance's logs. Default slog.Default().
	Logger *slog.Logger
	// MeterProvider gets the reaper's, the cleaner's and the maintainer's
	// instruments. Default: the global OpenTelemetry provider.
	MeterProvider metric.MeterProvider
}

// Maintenance is a database's upkeep for a process that claims nothing
// itself, such as a server whose clients receive through it. Its reaper
// runs at every interval whether or not this process maintains the
// database, so that leases that ended come back within ReapInterval (the
// reaper is safe to run everywhere); its cleaner runs only while it holds
// the maintainer lease, as a worker's does.
type Maintenance struct {
	maint   *maintainer
	reaper  *Reaper
	cleaner *Cleaner
	state   runstate.State
}

// NewMaintenance returns the upkeep of cfg.Store.
func NewMaintenance(cfg MaintenanceConfig) (*Maintenance, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("worker: Maintenance: Store is nil")
	}
	if cfg.LeaseDuration < 0 {
		return nil, fmt.Errorf("worker: Maintenance: LeaseDuration is %s, must not be negative", cfg.LeaseDuration)
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.ID == "" {
		cfg.ID = mailbox.NewWorkerID()
	}
	cfg.Clock = clock.OrSystem(cfg.Clock)
	cfg.Logger = orDefaultLogger(cfg.Logger)
	reaper, err := NewReaper(ReaperConfig{Store: cfg.Store, Interval: cfg.ReapInterval, Clock: cfg.Clock, Logger: cfg.Logger,
		MeterProvider: cfg.MeterProvider})
	if err != nil {
		return nil, err
	}
	cleaner, err := NewCleaner(CleanerConfig{Store: cfg.Store, CompletedRetention: cfg.CompletedRetention,
		DeadRetention: cfg.DeadRetention, Clock: cfg.Clock, Logger: cfg.Logger, MeterProvider: cfg.MeterProvider})
	if err != nil {
		return nil, err
	}
	maint, err := newMaintainer(cfg.Store, cfg.ID, cfg.LeaseDuration, cfg.Clock, cfg.Logger.With("maintainer_id", cfg.ID), cfg.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("worker: metrics: %w", err)
	}
	return &Maintenance{maint: maint, reaper: reaper, cleaner: cleaner}, nil
}

// Maintaining reports whether this process holds the maintainer lease
// now, so that its cleaner runs.
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
	loops.Go(func() { m.reaper.loop(ctx, nil, nil) })
	loops.Go(func() { m.cleaner.loop(ctx, m.maint.holding) })
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
